"""Kubernetes resource quantities ("500m", "64Gi", "1.5") as exact numbers."""

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
# Kubernetes' grammar (apimachinery resource.Quantity): a number (`1`, `1.5`, `.5`, `1.`)
# with a binary or decimal SI suffix or a decimal exponent (`129e6`, `1E3`); a leading `+`.
# Negative quantities parse there but no resource field takes one, so they are refused here.
_QUANTITY = re.compile(
    r"\+?(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"((?P<suffix>[KMGTPE]i|[mkMGTPE]?)|[eE](?P<exponent>[+-]?[0-9]+))"
)


def parse_quantity(text: str) -> Decimal:
    """Return the value of a Kubernetes quantity; raise ValueError naming valid forms."""
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise ValueError(
            f"{text!r} is not a Kubernetes quantity (examples: '500m', '4', '64Gi', '1.5T', "
            "'129e6')"
        )
    try:
        if match["exponent"] is not None:
            return Decimal(match["number"]) * Decimal(10) ** int(match["exponent"])
        return Decimal(match["number"]) * _SUFFIXES[match["suffix"]]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"{text!r} is not a number") from exc


def to_mebibytes(text: str) -> int:
    """A memory quantity in whole MiB, rounded down (Slurm's RealMemory unit)."""
    return int(parse_quantity(text) / _SUFFIXES["Mi"])
