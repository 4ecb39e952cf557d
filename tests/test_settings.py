"""``Settings.merged``: the config file's ``[hub]`` table and the command line onto the defaults."""

from __future__ import annotations

import pytest

from hub.settings import Settings


def test_unknown_keys_are_refused_by_name() -> None:
    # ``extra`` was once accepted as a free-form table that nothing read: a typo'd or
    # misplaced setting must fail loudly instead of being kept and ignored.
    with pytest.raises(ValueError, match=r"unknown hub setting\(s\): extra, outbox_byte$"):
        Settings().merged({"extra": {"a": 1}, "outbox_byte": 1, "port": 1})


def test_values_are_converted_where_toml_cannot_say_it_and_checked_otherwise() -> None:
    settings = Settings().merged({"embed_origins": ["https://a.test"], "ping_interval": 5})
    assert settings.embed_origins == ("https://a.test",)
    assert settings.ping_interval == 5.0
    assert isinstance(settings.ping_interval, float)
    with pytest.raises(ValueError, match="'port' must be int"):
        Settings().merged({"port": "8765"})
    with pytest.raises(ValueError, match="prompt_policy"):
        Settings().merged({"prompt_policy": "whoever"})
