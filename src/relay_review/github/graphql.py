"""GitHub's GraphQL API: the few queries and mutations relay-review sends, and one call.

Review threads are resolved only through GraphQL (``resolveReviewThread``), and found through
``pullRequest.reviewThreads``. The call is a plain ``POST {GITHUB_API_URL}/graphql`` (GHES:
``/api/graphql``) through the PyGithub client the run already has: same token, timeout and
transport (a POST is never repeated by the transport). Every document here is validated against
GitHub's published schema by the tests (``@octokit/graphql-schema``); keep them module constants
so the tests can see them all.
"""

from __future__ import annotations

from typing import Any

from github import Github, GithubException

from relay_review.github.errors import CLIENT_ERRORS, GitHubEdgeError, translate

#: Threads per page and comments per thread read (a thread's 31st reply is not read).
THREADS_PER_PAGE = 50
COMMENTS_PER_THREAD = 30
#: Most pages of threads read (500 threads): a bound on a hostile or huge pull request.
MAX_THREAD_PAGES = 10
#: 👎 reactions read per comment.
REACTIONS_PER_COMMENT = 20

THREADS_QUERY = f"""
query RelayReviewThreads($owner: String!, $name: String!, $number: Int!, $after: String) {{
  repository(owner: $owner, name: $name) {{
    pullRequest(number: $number) {{
      reviewThreads(first: {THREADS_PER_PAGE}, after: $after) {{
        pageInfo {{ hasNextPage endCursor }}
        nodes {{
          id
          isResolved
          path
          line
          diffSide
          resolvedBy {{ __typename login }}
          comments(first: {COMMENTS_PER_THREAD}) {{
            nodes {{
              databaseId
              body
              authorAssociation
              author {{ __typename login }}
              reactions(content: THUMBS_DOWN, first: {REACTIONS_PER_COMMENT}) {{
                nodes {{ user {{ __typename login }} }}
              }}
            }}
          }}
        }}
      }}
    }}
  }}
}}
"""

REPLY_MUTATION = """
mutation RelayReviewReply($thread: ID!, $body: String!) {
  addPullRequestReviewThreadReply(input: {pullRequestReviewThreadId: $thread, body: $body}) {
    comment { id }
  }
}
"""

RESOLVE_MUTATION = """
mutation RelayReviewResolve($thread: ID!) {
  resolveReviewThread(input: {threadId: $thread}) {
    thread { id isResolved }
  }
}
"""

#: Every document sent (the schema test validates each one).
DOCUMENTS = {"threads": THREADS_QUERY, "reply": REPLY_MUTATION, "resolve": RESOLVE_MUTATION}


class GraphQLError(GitHubEdgeError):
    """GitHub answered the query with ``errors`` (the first message is kept, cut)."""


def graphql(gh: Github, query: str, variables: dict[str, Any], what: str) -> dict[str, Any]:
    """``data`` of ``query`` with ``variables``; raises :class:`GitHubEdgeError` (a GraphQL
    ``errors`` answer as :class:`GraphQLError`) saying ``what`` could not be done."""
    try:
        _, answer = gh.requester.graphql_query(query, variables)
    except GithubException as exc:
        data = exc.data if isinstance(exc.data, dict) else {}
        errors = data.get("errors")
        if exc.status == 400 and isinstance(errors, list) and errors:
            first = errors[0] if isinstance(errors[0], dict) else {}
            message = str(first.get("message") or "")[:200]
            raise GraphQLError(f"cannot {what}: GraphQL error: {message}", status=400) from None
        raise translate(exc, f"cannot {what}") from None
    except CLIENT_ERRORS as exc:
        raise translate(exc, f"cannot {what}") from None
    got = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(got, dict):
        raise GraphQLError(f"cannot {what}: the answer holds no data")
    return got
