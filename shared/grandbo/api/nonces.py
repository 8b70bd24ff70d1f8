"""Nonces of signed admin requests: each is accepted once per key within its retention."""

from __future__ import annotations

from grandbo.storage.tenant_scope import TenantScopedRepository


class NonceStore(TenantScopedRepository):
    """Spent nonces, per tenant and key; old ones are pruned as new ones arrive."""

    def claim_nonce(self, tenant_id: str, key_id: str, nonce: str, retention_s: int) -> bool:
        """Record a signed request's nonce; False if this key already used it."""
        with self._tenant_scope(tenant_id) as cur:
            cur.execute(
                "DELETE FROM admin_request_nonces WHERE tenant_id = %s"
                " AND seen_at < clock_timestamp() - make_interval(secs => %s)",
                (tenant_id, retention_s),
            )
            cur.execute(
                "INSERT INTO admin_request_nonces (tenant_id, key_id, nonce) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant_id, key_id, nonce) DO NOTHING",
                (tenant_id, key_id, nonce),
            )
            return cur.rowcount == 1
