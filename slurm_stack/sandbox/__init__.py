"""The local sandbox: the rendered stack run as podman pods (see plan.py for the translation)."""
