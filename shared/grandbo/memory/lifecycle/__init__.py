"""Operations on an organization's whole memory: moving its lake between stores."""
