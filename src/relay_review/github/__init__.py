"""github package."""
