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

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 engram \
 && useradd --system --uid 10001 --gid engram --home-dir /home/engram --create-home --shell /usr/sbin/nologin engram
COPY --from=build /engram /engram
USER 10001:10001
WORKDIR /home/engram
EXPOSE 8080
ENTRYPOINT ["/engram"]
CMD ["serve"]
