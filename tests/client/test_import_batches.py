"""memoryhub_client.transfer.import_batches: a file cut into bodies under the server's
limit, each key whole, notes with their memory, line numbers traced back."""

from __future__ import annotations

import json

from memoryhub_client.transfer import import_batches

HEADER = {"record": "header", "format": "memoryhub-export", "version": 1}


def file_of(records: list[dict[str, object] | str]) -> bytes:
    lines = [json.dumps(HEADER)] + [r if isinstance(r, str) else json.dumps(r) for r in records]
    return ("\n".join(lines) + "\n").encode()


def memory(key: str, memory_id: str, content: str = "x" * 100) -> dict[str, object]:
    return {"record": "memory", "id": memory_id, "key": key, "content": content}


def test_each_batch_has_the_header_and_stays_under_the_limit_and_keys_stay_whole() -> None:
    records: list[dict[str, object] | str] = []
    for i in range(30):
        records += [memory(f"k{i}", f"{i}-a"), memory(f"k{i}", f"{i}-b")]
    records += [{"record": "annotation", "memory": f"{i}-b", "note": "n"} for i in range(30)]
    records.append({"record": "end", "memories": 60, "annotations": 30})

    batches = import_batches(file_of(records), batch_bytes=1200)

    assert len(batches) > 5
    seen: dict[str, int] = {}
    for index, batch in enumerate(batches):
        lines = batch.body.decode().splitlines()
        assert json.loads(lines[0]) == HEADER
        assert len(batch.body) <= 1200 + len(json.dumps(HEADER)) + 1
        for line in lines[1:]:
            record = json.loads(line)
            assert record["record"] != "end"
            owner = record["key"] if record["record"] == "memory" else "k" + record["memory"].split("-")[0]
            assert seen.setdefault(owner, index) == index, f"{owner} spans two batches"
    assert sum(batch.records for batch in batches) == 90


def test_line_numbers_trace_back_to_the_file() -> None:
    raw = file_of([memory("a", "1"), "{oops", memory("b", "2"), memory("c", "3")])

    batches = import_batches(raw, batch_bytes=250)

    traced = sorted(
        (batch.original_line(n), json.loads(line)["key"] if line.startswith('{"') else line)
        for batch in batches
        for n, line in enumerate(batch.body.decode().splitlines()[1:], start=2)
    )
    assert traced == [(2, "a"), (3, "{oops"), (4, "b"), (5, "c")]
    assert batches[0].original_line(99) == 1


def test_a_small_file_is_one_batch() -> None:
    raw = file_of([memory("a", "1"), memory("b", "2")])

    batches = import_batches(raw)

    assert len(batches) == 1
    assert batches[0].body == raw


def test_keys_whose_versions_name_each_other_travel_in_one_batch() -> None:
    """A longer duplicate saved under another key supersedes that key's entry, and an
    unsupersede gives it back: the server links them only when both are in its batch."""
    records: list[dict[str, object] | str] = [
        {**memory("cache-policy", "c1"), "supersedes": "r2"},
        *[memory(f"k{i}", f"{i}") for i in range(20)],
        memory("reborn", "r1"),
        memory("reborn", "r2"),
        {**memory("reborn", "r3"), "supersedes": "c1", "restored_from": "r2"},
        {"record": "confirmation", "memory": "r3", "confirmed_by": "bob"},
    ]

    batches = import_batches(file_of(records), batch_bytes=1200)

    assert len(batches) > 2
    holding = [
        {
            json.loads(line).get("key") or json.loads(line)["memory"]
            for line in b.body.decode().splitlines()[1:]
        }
        for b in batches
    ]
    [together] = [keys for keys in holding if "cache-policy" in keys]
    assert {"cache-policy", "reborn", "r3"} <= together
