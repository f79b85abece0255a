"""The upload ids a sweep keeps are read when the sweep first asks for them."""

from __future__ import annotations

from distcp.commit.orphans import Referenced


def test_referenced_ids_are_read_once_when_first_asked_and_never_when_not() -> None:
    reads: list[int] = []

    def read() -> set[str]:
        reads.append(1)
        return {"u1", "u2"}

    never = Referenced(read)
    assert reads == []  # a sweep that found no upload pending asks nothing
    asked = Referenced(read)
    assert "u1" in asked and "u3" not in asked
    assert sorted(asked) == ["u1", "u2"] and len(asked) == 2
    assert {"u2", "u9"} & asked == {"u2"}
    assert reads == [1]
    del never
