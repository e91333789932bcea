"""Filters verified, not trusted: does a record a query returned belong to the request's filters?

The audit services apply the filters themselves, but nothing proves they do: the Graph service filter has two names
and only one of them may be honoured, and a service may return records the filters exclude. So the collector checks
each record against the filters it can judge from the record, and the chunk writer trims (and counts) the ones that
cannot match.

A record is trimmed only when the record itself shows it cannot match; whenever that is unclear, it is kept:

* values inside one filter are alternatives (OR), filters together must all hold (AND), as the services document;
* texts compare case-insensitively (``casefold``): record types (Graph ``exchangeItem`` and Exchange
  ``ExchangeItem`` are one type), operations, user names and services are not case-sensitive in Microsoft 365;
* a field the record does not carry (absent or null) cannot be judged: the record is kept;
* ``userPrincipalNames`` matches ``userPrincipalName``, ``userId`` or ``auditData.UserId`` (any one suffices);
* ``ipAddresses`` matches ``clientIp``, ``auditData.ClientIP``, ``ClientIPAddress`` or ``ActorIpAddress``, compared as
  addresses (a port or brackets, as in ``203.0.113.7:443`` or ``[2001:db8::1]:443``, are dropped; an IPv4-mapped IPv6
  address is its IPv4 address); a text that is no address cannot be judged;
* ``objectIds`` matches ``objectId`` or ``auditData.ObjectId`` when it equals a filter value, contains it, or matches
  it as a wildcard pattern (``*``): how the service matches object ids is not documented (Purview's search accepts
  partial URLs and wildcards), so only a record that matches in none of these ways is trimmed;
* ``service`` matches ``service`` (the workload: ``Exchange``, ``SharePoint``, ``OneDrive``, ...);
* ``keyword`` and ``administrativeUnitIds`` are **not checked**: which fields a keyword searches and how it is
  tokenised is not documented, and a record's ``administrativeUnits`` need not be filled; such records are trusted.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from shared.audit.ports import AuditFilters, AuditRecord
from shared.records.json_codec import loads as json_loads
from shared.records.raw_json import MISSING, Item, Projection

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

UNCHECKED = ("keyword", "administrativeUnitIds")
"""Filters a record cannot be judged by (trusted to the service)."""


def _folded(values: Iterable[str]) -> frozenset[str]:
    return frozenset(v.strip().casefold() for v in values if v.strip())


def parse_address(text: str) -> IpAddress | None:
    """The address in a record's IP text (``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80``, ``::1``), or None."""
    value = text.strip()
    if value.startswith("[") and "]" in value:
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # IPv4 with a port (an IPv6 address has at least two colons)
        value = value.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _texts(record: AuditRecord, top: Iterable[str], inside: Iterable[str] = ()) -> Iterator[str]:
    """The string values the record carries under these top-level keys and ``auditData`` keys."""
    for key in top:
        value = record.get(key)
        if isinstance(value, str):
            yield value
    data = record.get("auditData")
    if isinstance(data, dict):
        for key in inside:
            value = data.get(key)
            if isinstance(value, str):
                yield value


_RECORD_FIELDS = ("auditLogRecordType", "operation", "userPrincipalName", "userId", "service", "clientIp", "objectId")
_AUDIT_DATA_FIELDS = ("UserId", "ClientIP", "ClientIPAddress", "ActorIpAddress", "ObjectId")
_VIEW = Projection(_RECORD_FIELDS, nested={"auditData": _AUDIT_DATA_FIELDS})
"""Every field :meth:`FilterCheck.keeps` reads, and only those: a record kept as bytes is checked on them."""


@dataclass(frozen=True, slots=True)
class FilterCheck:
    """The checkable part of one request's filters (casefolded); build it with :meth:`of`."""

    record_types: frozenset[str] = frozenset()
    operations: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    addresses: frozenset[IpAddress] = frozenset()
    object_ids: tuple[str, ...] = ()
    service: str | None = None

    @classmethod
    def of(cls, filters: AuditFilters) -> FilterCheck | None:
        """The check for these filters, or None when none of them can be checked (nothing to verify)."""
        addresses = frozenset(a for a in (parse_address(v) for v in filters.ip_addresses) if a is not None)
        check = cls(
            record_types=_folded(filters.record_types),
            operations=_folded(filters.operations),
            users=_folded(filters.user_principal_names),
            addresses=addresses,
            object_ids=tuple(sorted(_folded(filters.object_ids))),
            service=filters.service.strip().casefold() if filters.service and filters.service.strip() else None,
        )
        return check if check.checked else None

    @property
    def checked(self) -> tuple[str, ...]:
        """The request's filter names (as ``POST /api/collections`` spells them) this check verifies."""
        names = {
            "recordTypes": self.record_types,
            "operations": self.operations,
            "userIds": self.users,
            "ipAddresses": self.addresses,
            "objectIds": self.object_ids,
            "service": self.service,
        }
        return tuple(name for name, value in names.items() if value)

    def keeps(self, record: AuditRecord) -> bool:
        """False only when the record shows it cannot match one of the filters."""
        return (
            self._one_of(self.record_types, _texts(record, ("auditLogRecordType",)))
            and self._one_of(self.operations, _texts(record, ("operation",)))
            and self._one_of(self.users, _texts(record, ("userPrincipalName", "userId"), ("UserId",)))
            and self._service_ok(record)
            and self._address_ok(record)
            and self._object_ok(record)
        )

    def keeps_item(self, item: Item) -> bool:
        """:meth:`keeps` for a record kept as its JSON bytes, reading only the fields the check needs."""
        found = _VIEW.read(item)
        if found is None:  # auditData is not an object: the whole record decides
            return self.keeps(json_loads(bytes(item)))
        record: dict[str, Any] = {name: value for name, value in zip(_RECORD_FIELDS, found) if value is not MISSING}
        if found[-1] is not MISSING:
            record["auditData"] = found[-1]
        return self.keeps(record)

    @staticmethod
    def _one_of(wanted: frozenset[str], values: Iterator[str]) -> bool:
        """No filter, no value to judge by, or one value among the wanted ones."""
        if not wanted:
            return True
        seen = False
        for value in values:
            seen = True
            if value.strip().casefold() in wanted:
                return True
        return not seen

    def _service_ok(self, record: AuditRecord) -> bool:
        if self.service is None:
            return True
        return self._one_of(frozenset({self.service}), _texts(record, ("service",)))

    def _address_ok(self, record: AuditRecord) -> bool:
        if not self.addresses:
            return True
        texts = _texts(record, ("clientIp",), ("ClientIP", "ClientIPAddress", "ActorIpAddress"))
        found = [a for a in (parse_address(t) for t in texts) if a is not None]
        return not found or any(a in self.addresses for a in found)

    def _object_ok(self, record: AuditRecord) -> bool:
        if not self.object_ids:
            return True
        values = [v.casefold() for v in _texts(record, ("objectId",), ("ObjectId",))]
        if not values:
            return True
        return any(_object_matches(value, wanted) for value in values for wanted in self.object_ids)


def _object_matches(value: str, wanted: str) -> bool:
    """Equal, containing, or (with ``*``) matching as a wildcard pattern; both sides casefolded."""
    if wanted in value:
        return True
    return "*" in wanted and fnmatch.fnmatchcase(value, wanted)


def describe(check: FilterCheck | None, filters: AuditFilters) -> dict[str, Any]:
    """What the manifest says about the verification: which request filters were checked and which were trusted."""
    given = {
        "keyword": filters.keyword,
        "administrativeUnitIds": filters.administrative_unit_ids,
    }
    return {
        "checked": list(check.checked) if check is not None else [],
        "trusted": [name for name in UNCHECKED if given.get(name)],
    }
