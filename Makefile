.PHONY: test build dev

# Brings up (or reuses) the local stack, then vets and tests everything.
test:
	scripts/test

build:
	go build -o bin/engram ./cmd/engram

# Brings up the stack, migrates and runs the engine (the README's first command).
dev:
	scripts/dev

# Code generation: buf with local plugins (go install …; no remote plugins).
BUF_VERSION ?= v1.75.0
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTOC_GEN_CONNECT_GO_VERSION ?= v1.19.1
GOBIN ?= $(shell go env GOPATH)/bin
GEN_PATH := $(GOBIN):$(PATH)

.PHONY: generate checkgenerate gentools
gentools:
	@test -x $(GOBIN)/buf || go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	@test -x $(GOBIN)/protoc-gen-go || go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@test -x $(GOBIN)/protoc-gen-connect-go || go install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT_GO_VERSION)
	@test -x clients/ts/node_modules/.bin/protoc-gen-es || (cd clients/ts && npm ci --no-audit --no-fund --loglevel=error)

# Regenerates gen/ (Go) and clients/ts/gen/ (TypeScript, protoc-gen-es from clients/ts/node_modules) from proto/.
generate: gentools
	PATH=$(GEN_PATH) buf lint
	rm -rf gen/engram clients/ts/gen
	PATH=$(GEN_PATH) buf generate
	PATH=$(GEN_PATH) buf generate --template buf.gen.ts.yaml

# Fails when gen/ or clients/ts/gen/ differs from what proto/ generates (run by scripts/test).
checkgenerate: gentools
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	  PATH=$(GEN_PATH) buf lint && \
	  PATH=$(GEN_PATH) buf generate -o $$tmp && \
	  PATH=$(GEN_PATH) buf generate --template buf.gen.ts.yaml -o $$tmp && \
	  if ! diff -r $$tmp/gen gen >/dev/null; then \
	    diff -r $$tmp/gen gen | head -50; \
	    echo "gen/ is out of date with proto/: run 'make generate' and commit" >&2; exit 1; \
	  fi && \
	  if ! diff -r $$tmp/clients/ts/gen clients/ts/gen >/dev/null; then \
	    diff -r $$tmp/clients/ts/gen clients/ts/gen | head -50; \
	    echo "clients/ts/gen/ is out of date with proto/: run 'make generate' and commit" >&2; exit 1; \
	  fi
