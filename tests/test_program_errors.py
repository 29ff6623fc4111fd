"""How the stack program fails under the Pulumi CLI: a bad stack config is a `pulumi.RunError`.

pulumi-language-python-exec prints `str(error)` for a RunError and a traceback headed
"Program failed with an unhandled exception" for anything else.
"""

import json

import pulumi
import pytest

from slurm_stack.offline import run_program
from slurm_stack.program import StackConfigError, run
from slurm_stack.spec import SpecError, load_spec

BAD = {"name": "dev", "workerPools": [{"name": "cpu", "gpus": -1}], "jail": {}}


def _expected_message(raw: object) -> str:
    """What load_spec says about `raw`: the message the user reads today."""
    with pytest.raises(SpecError) as error:
        load_spec(raw)
    return str(error.value)


def test_bad_config_is_a_run_error_that_registers_nothing() -> None:
    failures: list[BaseException] = []

    def program() -> None:
        try:
            run()
        except BaseException as error:
            failures.append(error)

    result = run_program(program, config={"slurm-stack:cluster": json.dumps(BAD)})
    assert result.resources == ()
    assert len(failures) == 1
    error = failures[0]
    assert isinstance(error, pulumi.RunError)
    assert isinstance(error, SpecError)  # callers that catch SpecError still do
    assert str(error) == _expected_message(BAD)
    assert "slurm-stack:cluster.workerPools[0].gpus" in str(error)
    assert "slurm-stack:cluster.jail" in str(error)
    assert error.__cause__ is None and error.__suppress_context__


def test_run_error_leaves_the_program() -> None:
    with pytest.raises(pulumi.RunError, match=r"slurm-stack:cluster\.workerPools\[0\]\.gpus"):
        run_program(run, config={"slurm-stack:cluster": json.dumps(BAD)})


def test_missing_config_is_a_run_error() -> None:
    with pytest.raises(StackConfigError) as error:
        run_program(run, config={})
    assert str(error.value) == _expected_message(None)
    assert "slurm-stack:cluster: must be an object" in str(error.value)


def test_keeps_the_stack_project_in_the_key() -> None:
    with pytest.raises(pulumi.RunError) as error:
        run_program(run, project="my-slurm", config={"my-slurm:cluster": json.dumps(BAD)})
    assert "my-slurm:cluster.workerPools[0].gpus" in str(error.value)
