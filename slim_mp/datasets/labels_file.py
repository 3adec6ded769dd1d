"""The ``labels.txt`` file of TF-Slim data sets: one ``<id>:<name>`` line per class."""

import os

LABELS_FILENAME = "labels.txt"


def write_labels(directory: str, labels_to_names: dict[int, str]) -> None:
    """Write ``labels.txt`` in ``directory``, ids ascending."""
    lines = [f"{label}:{name}\n" for label, name in sorted(labels_to_names.items())]
    with open(os.path.join(directory, LABELS_FILENAME), "w", encoding="utf-8") as handle:
        handle.writelines(lines)


def read_labels(directory: str) -> dict[int, str]:
    """Return ``{id: name}`` from ``directory/labels.txt``, or an empty dict when there is no such file."""
    path = os.path.join(directory, LABELS_FILENAME)
    if not os.path.exists(path):
        return {}
    labels_to_names = {}
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            label, separator, name = line.partition(":")
            if not separator or not label.strip().isdigit():
                raise ValueError(f"{path} line {line_number} is {line!r}, not '<id>:<name>'; fix or delete the file.")
            labels_to_names[int(label)] = name
    return labels_to_names
