"""The neighbouring relations and their spellings (no heavy imports: the budget's rule and
the command line's configuration use them on every machine)."""

from __future__ import annotations

from dpnet.errors import PrivacyError

_RELATIONS = {
    "replace_one": "replace_one",
    "replace_one_label": "replace_one",
    "add_remove": "add_remove",
    "add_or_remove": "add_remove",
    "add_remove_one": "add_remove",
    "add_or_remove_one": "add_remove",
}


def canonical_relation(relation: str) -> str:
    """'replace_one' or 'add_remove' from a spelling such as 'replace-one' or 'add/remove'."""
    key = str(relation).strip().lower().replace("-", "_").replace(" ", "_").replace("/", "_")
    if key not in _RELATIONS:
        raise PrivacyError(
            f"unknown neighbouring relation {relation!r}: use 'replace_one' or 'add_remove'"
        )
    return _RELATIONS[key]
