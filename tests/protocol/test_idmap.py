"""IdMap: minting, resolving and rejecting request ids."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hub.protocol.idmap import IdMap


def test_ids_count_from_zero() -> None:
    ids: IdMap[str] = IdMap()
    assert [ids.register("a"), ids.register("b"), ids.register("c")] == [0, 1, 2]
    assert len(ids) == 3


def test_resolve_pops_the_context() -> None:
    ids: IdMap[str] = IdMap()
    n = ids.register("ctx")
    assert n in ids
    assert ids.resolve(n) == "ctx"
    assert n not in ids
    assert ids.resolve(n) is None
    assert len(ids) == 0


def test_peek_does_not_pop() -> None:
    ids: IdMap[str] = IdMap()
    n = ids.register("ctx")
    assert ids.peek(n) == "ctx"
    assert ids.peek(n) == "ctx"
    assert len(ids) == 1
    assert ids.peek(99) is None


def test_unknown_and_wrong_type_ids_resolve_to_none() -> None:
    ids: IdMap[str] = IdMap()
    ids.register("zero")
    ids.register("one")
    for stray in ["0", "1", None, True, False, 5, -1]:
        assert ids.resolve(stray) is None
        assert ids.peek(stray) is None
        assert stray not in ids
    # True == 1 in Python, but a JSON true is not the id 1.
    assert 1.0 not in ids
    assert len(ids) == 2


def test_reject_all_returns_contexts_in_registration_order_and_empties() -> None:
    ids: IdMap[str] = IdMap()
    for name in ["a", "b", "c", "d"]:
        ids.register(name)
    ids.resolve(1)
    assert ids.reject_all() == ["a", "c", "d"]
    assert len(ids) == 0
    assert ids.reject_all() == []


def test_ids_are_not_reused_after_reject_all() -> None:
    ids: IdMap[str] = IdMap()
    old = ids.register("old")
    ids.reject_all()
    new = ids.register("new")
    assert new != old
    # A late answer to the rejected request does not match the new one.
    assert ids.resolve(old) is None
    assert ids.resolve(new) == "new"


def test_none_is_a_storable_context_but_indistinguishable_on_resolve() -> None:
    ids: IdMap[None] = IdMap()
    n = ids.register(None)
    assert n in ids
    assert ids.resolve(n) is None
    assert n not in ids


@given(st.lists(st.tuples(st.sampled_from(["register", "resolve", "reject"]), st.integers(0, 30))))
def test_matches_a_model(ops: list[tuple[str, int]]) -> None:
    ids: IdMap[int] = IdMap()
    model: dict[int, int] = {}
    minted = 0
    for op, arg in ops:
        if op == "register":
            n = ids.register(arg)
            assert n == minted
            minted += 1
            model[n] = arg
        elif op == "resolve":
            assert ids.resolve(arg) == model.pop(arg, None)
        else:
            assert ids.reject_all() == list(model.values())
            model.clear()
        assert len(ids) == len(model)
        assert all(k in ids for k in model)
