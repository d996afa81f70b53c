"""Allow ``python -m relay_review``."""

from relay_review.cli import main

raise SystemExit(main())
