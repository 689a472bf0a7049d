"""A summary is JSON a cache may hold from another run (or a hand): the
views the rules' project hooks read take what is malformed as unknown,
never as a crash of the phase."""

from __future__ import annotations

from pathlib import Path

from loadlint.project.handles import imported_loaders
from loadlint.project.modules import ModuleResolver
from loadlint.rules.project_context import HandleClass, Setting


def test_a_malformed_imported_dataset_or_handle_reads_as_unknown(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "data.py").write_text("")
    train = str(tmp_path / "train.py")
    summary = {
        "version": 0, "imports": {}, "functions": {}, "flags": {"start_methods": ["spawn", 3]},
        "imported_datasets": [
            {"at": 1, "class": "data.Partial", "workers": "4", "context": 7},
            {"at": 2, "class": "data.Listed", "workers": True},
            {"at": 3, "class": 5},
        ],
    }
    data = {"version": 0, "imports": {}, "functions": {}, "flags": {},
            "handle_classes": {"Partial": {"cls": 3}, "Listed": ["not", "a", "dict"]}}
    found = imported_loaders(train, summary, lambda path: data, ModuleResolver(tmp_path))  # type: ignore[arg-type]
    assert [(f.at, f.workers, f.context, f.start_methods, f.handle) for f in found] == [
        # A string is a worker count's code (summary version 10): kept as written.
        (1, "4", None, frozenset({"spawn"}), HandleClass("3", "", "", "", "")),
        (2, None, None, frozenset({"spawn"}), None),
    ]


def test_a_malformed_descriptor_reads_as_written_and_unknown() -> None:
    assert Setting.of(["value", 4]) == Setting(True)
    assert Setting.of({"value": 4, "note": 9, "cpu_count": "yes"}) == Setting(True, True, 4, True, None)


def test_malformed_module_flags_read_as_none_seen() -> None:
    from loadlint.project.context import flags_of

    flags = flags_of({"cuda": 1, "start_methods": 7})  # type: ignore[typeddict-item]
    assert (flags.cuda, flags.cuda_code, flags.start_methods) == (True, False, frozenset())
