"""Value types every layer shares, with no import of the project: the time window, the request's filters, a record,
a page of them and a record that could not be read, and the tenant GUID's form.

They sit below everything else so that the modules that use them (the audit adapters and ports, the record rules, the
models that cross function boundaries, the settings) need not import one another for them: ``shared.audit.ports``,
``shared.audit.config`` and ``shared.models`` re-export what they used to define.

May import: nothing outside itself.
"""

from __future__ import annotations

from shared.values.audit import AuditFilters, AuditRecord, MalformedRecord, RecordPage, TimeWindow, is_tenant_guid

__all__ = ["AuditFilters", "AuditRecord", "MalformedRecord", "RecordPage", "TimeWindow", "is_tenant_guid"]
