.PHONY: test build

# Brings up (or reuses) the local stack, then vets and tests everything.
test:
	scripts/test

build:
	go build -o bin/engram ./cmd/engram
