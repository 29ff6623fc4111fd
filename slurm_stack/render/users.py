"""What the login nodes and the users Job need to know about declared users.

`users.json` drives the users Job (`images/ops/sync-users`): accounts, groups, homes and Slurm
associations. `authorized_keys.<user>` feed sshd's AuthorizedKeysCommand. Both live in one
ConfigMap that is updated in place, so adding a user restarts no pod.
"""

import json

from slurm_stack import paths
from slurm_stack.spec.errors import CONFIG_KEY, join_path
from slurm_stack.spec.models import ClusterSpec, derived_id

USERS_FILE = "users.json"
KEYS_PREFIX = "authorized_keys."
LOGIN_GROUPS_FILE = "directory_login_groups"  # read by the login nodes' key command


def default_account(spec: ClusterSpec) -> str:
    """The Slurm account of users who name none: `login.defaultAccount`, else the cluster's."""
    return spec.login.default_account or spec.name


def users_document(spec: ClusterSpec) -> dict[str, object]:
    """Every declared user with ids resolved, and the stack config key that declared it."""
    own_groups = {user.name: user.effective_gid for user in spec.login.users}
    users = []
    for i, user in enumerate(spec.login.users):
        users.append(
            {
                "name": user.name,
                "uid": user.effective_uid,
                "gid": user.effective_gid,
                "groups": [
                    {"name": group, "gid": own_groups.get(group, derived_id(group))}
                    for group in user.groups
                ],
                "shell": user.shell,
                "home": f"/home/{user.name}",
                "account": user.account or default_account(spec),
                "defaultQos": user.default_qos,
                "configKey": f"{CONFIG_KEY}.{join_path('login', 'users', i)}",
            }
        )
    return {
        "cluster": spec.name,
        "accounting": spec.accounting.enabled,
        "slurmUser": paths.SLURM_USER,
        "users": users,
    }


def authorized_keys(spec: ClusterSpec) -> dict[str, str]:
    """authorized_keys file contents by user name (root and each configured user)."""
    files = {}
    if spec.login.root_authorized_keys:
        files["root"] = "\n".join(spec.login.root_authorized_keys) + "\n"
    for user in spec.login.users:
        files[user.name] = "\n".join(user.authorized_keys) + "\n"
    return dict(sorted(files.items()))


def users_config_files(spec: ClusterSpec) -> dict[str, str]:
    """The users ConfigMap's files: users.json and one authorized_keys.<user> per user."""
    files = {USERS_FILE: json.dumps(users_document(spec), indent=2, sort_keys=True) + "\n"}
    for name, text in authorized_keys(spec).items():
        files[f"{KEYS_PREFIX}{name}"] = text
    if spec.directory is not None and spec.directory.login_groups:
        files[LOGIN_GROUPS_FILE] = "".join(f"{group}\n" for group in spec.directory.login_groups)
    return files
