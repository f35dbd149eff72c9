.PHONY: test build dev

# Brings up (or reuses) the local stack, then vets and tests everything.
test:
	scripts/test

build:
	go build -o bin/engram ./cmd/engram

# Brings up the stack, migrates and runs the engine (the README's first command).
dev:
	scripts/dev
