# django-environ ships no py.typed (its own annotations stay unread): the part of Env the
# reference site's settings use, typed as the package's signatures say.
import builtins
from pathlib import Path
from typing import IO, Any

class NoValue: ...

class Env:
    NOTSET: NoValue
    def __init__(self, **scheme: Any) -> None: ...
    def str(
        self,
        var: builtins.str,
        default: builtins.str | NoValue = ...,
        multiline: builtins.bool = False,
    ) -> builtins.str: ...
    def bool(self, var: builtins.str, default: builtins.bool | NoValue = ...) -> builtins.bool: ...
    def int(self, var: builtins.str, default: builtins.int | NoValue = ...) -> builtins.int: ...
    def list(
        self, var: builtins.str, cast: Any = None, default: Any = ...
    ) -> builtins.list[Any]: ...
    def dict(
        self, var: builtins.str, cast: Any = ..., default: Any = ...
    ) -> builtins.dict[Any, Any]: ...
    @classmethod
    def db_url_config(
        cls, url: builtins.str, engine: builtins.str | None = None
    ) -> builtins.dict[builtins.str, Any]: ...
    @classmethod
    def read_env(
        cls,
        env_file: builtins.str | Path | IO[builtins.str] | None = None,
        overwrite: builtins.bool = False,
        parse_comments: builtins.bool = False,
        encoding: builtins.str = "utf8",
        **overrides: Any,
    ) -> None: ...
