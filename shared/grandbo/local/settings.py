"""Runtime configuration, validated once at start-up from the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_DATA_DIR = Path(".grandbo")


class Settings(BaseModel):
    """Where the database is and which embedding provider answers.

    Locally nothing needs setting: an embedded PostgreSQL under `data_dir` and the local
    MiniLM model. In AWS, `database_url` (the application role) and `provider=titan`.
    """

    model_config = ConfigDict(frozen=True)

    database_url: str | None = Field(default=None, description="application role connection")
    admin_database_url: str | None = Field(default=None, description="schema owner, migrations")
    data_dir: Path = DEFAULT_DATA_DIR
    provider: Literal["local", "titan", "fake"] = "local"
    topic_embed_timeout_s: float = Field(default=2.0, gt=0, le=30)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        import os

        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        mapping = {
            "DATABASE_URL": "database_url",
            "GRANDBO_ADMIN_DATABASE_URL": "admin_database_url",
            "GRANDBO_DATA_DIR": "data_dir",
            "GRANDBO_EMBEDDING_PROVIDER": "provider",
            "GRANDBO_TOPIC_EMBED_TIMEOUT_S": "topic_embed_timeout_s",
        }
        for variable, field in mapping.items():
            if env.get(variable):
                values[field] = env[variable]
        return cls.model_validate(values)
