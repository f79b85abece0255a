"""The state directory's names: fixed, since state written by earlier runs must be found."""

from __future__ import annotations

from distcp.state.layout import StateLayout, state_root_of


def test_every_name_under_the_state_root() -> None:
    s = StateLayout("/d/.pydistcp")
    assert s.lock == "/d/.pydistcp/lock"
    assert s.commits() == "/d/.pydistcp/commits"
    assert s.commit("j-1") == "/d/.pydistcp/commits/j-1.json"
    assert s.commit("j-1", aside=True) == "/d/.pydistcp/commits/aside/j-1.json"
    assert s.dataset("k") == "/d/.pydistcp/datasets/k.json"
    assert s.manifests("k") == "/d/.pydistcp/manifests/k"
    assert (s.sizes(), s.sizes("k")) == ("/d/.pydistcp/sizes", "/d/.pydistcp/sizes/k.bin")
    assert (s.staging(), s.staging("j")) == ("/d/.pydistcp/staging", "/d/.pydistcp/staging/j")
    assert s.progress("j") == "/d/.pydistcp/progress/j"
    assert s.check_progress("j") == "/d/.pydistcp/progress/check-j"
    assert s.kept_plan("j") == "/d/.pydistcp/staging/j/plan"
    assert s.splits("g") == "/d/.pydistcp/splits/g"
    assert s.recovery("g") == "/d/.pydistcp/recovery/g"
    assert s.recovery_aside("g") == "/d/.pydistcp/recovery-aside/g"
    assert (s.outbox, s.event("k")) == ("/d/.pydistcp/events/outbox",
                                        "/d/.pydistcp/events/k.json")
    assert s.events_log == "/d/.pydistcp/events/events.jsonl"
    assert StateLayout("s3://b/p/.pydistcp").commit("x") == "s3://b/p/.pydistcp/commits/x.json"


def test_the_state_root_of_a_destination() -> None:
    assert state_root_of("/d", {}) == "/d/.pydistcp"
    assert state_root_of("/d", {}, state_dir="/s/") == "/s"
    assert state_root_of("/d/f.txt", {}, single_file="/d/f.txt") == "/d/.pydistcp"
