"""Declared users as rendered: resolved ids, the users ConfigMap and the users Job."""

import json

from slurm_stack.k8s.users import users_config_map, users_job
from slurm_stack.render.users import users_config_files, users_document
from slurm_stack.spec import load_spec
from slurm_stack.spec.models import derived_id

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqyBO8cZ1qbBKq1WLHVpAMsT5t7dfBZb5CmG0r0lMb2 k"


def spec(users: list[dict], **login: object):  # type: ignore[no-untyped-def]
    return load_spec(
        {
            "name": "c",
            "workerPools": [{"name": "cpu"}],
            "jail": {"storageClass": "nfs"},
            "login": {"users": users, **login},
        }
    )


ALICE = {"name": "alice", "authorizedKeys": [KEY], "groups": ["ml", "bob"]}
BOB = {"name": "bob", "uid": 5000, "gid": 5001, "authorizedKeys": [KEY], "account": "vision"}


def test_ids_are_derived_from_names_and_stable_when_reordered() -> None:
    forward = {u["name"]: u for u in users_document(spec([ALICE, BOB]))["users"]}  # type: ignore[union-attr,index]
    backward = {u["name"]: u for u in users_document(spec([BOB, ALICE]))["users"]}  # type: ignore[union-attr,index]
    for name in ("alice", "bob"):
        assert {**forward[name], "configKey": ""} == {**backward[name], "configKey": ""}
    alice = forward["alice"]
    assert alice["uid"] == alice["gid"] == derived_id("alice")
    # A group named after a declared user is that user's own group.
    assert alice["groups"] == [
        {"name": "ml", "gid": derived_id("ml")},
        {"name": "bob", "gid": 5001},
    ]
    assert alice["account"] == "c" and forward["bob"]["account"] == "vision"
    assert alice["configKey"] == "slurm-stack:cluster.login.users[0]"


def test_default_account_is_configurable() -> None:
    document = users_document(spec([ALICE], defaultAccount="research"))
    assert document["users"][0]["account"] == "research"  # type: ignore[index]


def test_users_config_map_is_updated_in_place_and_holds_keys() -> None:
    the_spec = spec([ALICE], rootAuthorizedKeys=[KEY])
    manifest = users_config_map(the_spec, users_config_files(the_spec))
    assert manifest["metadata"]["name"] == "c-users" and "immutable" not in manifest
    assert set(manifest["data"]) == {"users.json", "authorized_keys.alice", "authorized_keys.root"}
    assert json.loads(manifest["data"]["users.json"])["accounting"] is True


def test_users_job_runs_as_root_with_chown_only() -> None:
    job = users_job(spec([ALICE]), "c-slurm-config-x", "abc")
    assert job["metadata"]["name"] == "c-users-abc"
    pod = job["spec"]["template"]["spec"]
    (sync,) = pod["containers"]
    assert sync["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert sync["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"]: m for m in sync["volumeMounts"]}
    assert not mounts["/mnt/jail"].get("readOnly")  # it writes accounts and homes
    assert mounts["/etc/slurm-stack/users"]["readOnly"] is True
    assert pod["restartPolicy"] == "Never"  # a refused change keeps its log
