"""Lua syntax as Slurm's Lua plugins read it.

Debian builds job_submit/lua and cli_filter/lua against Lua 5.1 (they link liblua5.1), so a
script is checked by Lua 5.1's own compiler, through the `lupa` library, which bundles it: a
5.4 checker would pass `7 // 2`, which 5.1 refuses. The script is compiled, never run.
"""

import lupa.lua51 as lua51


def lua_syntax_problem(source: str, chunk_name: str) -> str | None:
    """Lua 5.1's message for the first syntax error in ``source`` (``<chunk_name>:<line>:
    <what>``), or None when it compiles."""
    compile_chunk = lua51.LuaRuntime(register_eval=False).eval("loadstring")
    # loadstring gives back the compiled function, or nil and the message (lupa: a tuple).
    result = compile_chunk(source, f"={chunk_name}")
    if isinstance(result, tuple) and result[0] is None:
        return str(result[1])
    return None
