# make test    every test of every module (the root, bench, contrib/* and
#              interop/*), with -race, against a throwaway PostgreSQL and
#              Redis; installs those first when missing
#              (scripts/install-test-deps.sh)
# make vet     go vet, every module
# make lint    gofmt check and staticcheck, every module
# make fuzz    each fuzz target (root, contrib and interop modules) for
#              FUZZTIME (default 10s), against a throwaway PostgreSQL and
#              Redis as for make test (the Postgres targets skip without)
# make bench   the benchmarks of both modules, against the same servers
#
# go-test and go-bench do the same as test and bench against whatever
# servers TEST_DATABASE_URL and TEST_REDIS_URL name, or else against servers
# each test process starts for itself.

GO ?= go
# staticcheck 2026.2.2; the module proxy knows its releases by these tags.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 10s
BENCHTIME ?= 1s
# Per test binary: a hung test fails in minutes, keeping CI within its budget
# (cmd/idem, which runs the real binary some hundreds of times, takes about
# 4 minutes under -race on two cores: 10 leaves room for a slower machine).
TESTTIMEOUT ?= 10m

# The bench module's packages, and those of them with tests: it may have none.
bench_pkgs = $(shell cd bench && $(GO) list -e ./... 2>/dev/null)
bench_tested = $(shell cd bench && $(GO) list -e -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... 2>/dev/null)

# The modules besides the root and bench, each a module of its own so that
# its dependencies never enter the main module: the contrib modules
# (framework adapters) and the interop modules (tests against real
# third-party clients, such as Stripe's SDK).
extra_mods = $(patsubst %/go.mod,%,$(wildcard contrib/*/go.mod) $(wildcard interop/*/go.mod))

.PHONY: test go-test deps vet lint fuzz bench go-bench

test: deps
	$(GO) run ./internal/cmd/withservers -- $(MAKE) --no-print-directory go-test

go-test:
	$(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./...
ifneq ($(strip $(bench_tested)),)
	cd bench && $(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./...
else
	@echo "bench: no test files"
endif
	@set -e; for m in $(extra_mods); do echo "cd $$m && $(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./..."; (cd $$m && $(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./...); done

deps:
	@scripts/install-test-deps.sh

vet:
	$(GO) vet ./...
ifneq ($(strip $(bench_pkgs)),)
	cd bench && $(GO) vet ./...
endif
	@set -e; for m in $(extra_mods); do echo "cd $$m && $(GO) vet ./..."; (cd $$m && $(GO) vet ./...); done

lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt -w needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
ifneq ($(strip $(bench_pkgs)),)
	cd bench && $(GO) run $(STATICCHECK) ./...
endif
	@set -e; for m in $(extra_mods); do echo "cd $$m && $(GO) run $(STATICCHECK) ./..."; (cd $$m && $(GO) run $(STATICCHECK) ./...); done
	@set -e; for m in . bench $(extra_mods); do if ! (cd $$m && $(GO) mod tidy -diff >/dev/null); then echo "go mod tidy needed in $$m"; exit 1; fi; done

fuzz: deps
	$(GO) run ./internal/cmd/withservers -- env FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

bench: deps
	$(GO) run ./internal/cmd/withservers -- $(MAKE) --no-print-directory go-bench

go-bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
ifneq ($(strip $(bench_pkgs)),)
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
endif
