-- API: tenant-scoped, versioned domain schemas stored through SchemaService.PutSchema,
-- and a lookup index for API keys by their public prefix.

CREATE TABLE schemas (
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    name        text        NOT NULL CHECK (name <> ''),
    version     integer     NOT NULL CHECK (version >= 1),
    source      text        NOT NULL,
    description text        NOT NULL DEFAULT '',
    created_by  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name, version)
);

--bun:split

CREATE UNIQUE INDEX api_keys_prefix ON api_keys (prefix);
