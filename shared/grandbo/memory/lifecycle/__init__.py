"""Operations on an organization's whole memory: moving its lake between stores (export,
and an import admitted by the write path's rules)."""
