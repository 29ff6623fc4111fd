"""What container registry credentials (`containerRegistryAuth`) must look like."""

import json

from slurm_stack.spec.rules import SECRET_PLACEHOLDER


def registry_auth_problem(text: str | None) -> str | None:
    """Why ``text`` is not a Docker config JSON with credentials, or None (also for no text,
    and for the offline stand-in of a `secure:` value, which cannot be decrypted here). The
    message never quotes the text: it is a secret."""
    if text is None or text == SECRET_PLACEHOLDER:
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return (
            'is not JSON: expected {"auths": {"<registry>": {"auth": "<base64 of user:password>"}}}'
        )
    auths = document.get("auths") if isinstance(document, dict) else None
    if not isinstance(auths, dict) or not auths:
        return 'has no "auths" object naming at least one registry'
    for registry, entry in auths.items():
        if not isinstance(entry, dict) or not (
            isinstance(entry.get("auth"), str)
            or (isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str))
        ):
            return (
                f'auths["{registry}"] needs "auth" (base64 of user:password) or "username" '
                'and "password"'
            )
    return None
