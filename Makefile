# Airlock. `make demo` and `make test` set up a fresh Debian/Ubuntu machine
# (packages, dockerd) themselves; both run as root or through sudo.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build install ui ui-test screenshots install-desktop setup demo test test-short fuzz lint desktop desktop-check desktop-dev bench soak clean

all: build

# bin/airlock-init is the sessions' init (engine/fastexec): static, so it
# runs in any image; the engine finds it beside its own binary.
# bin/airlock-engine is the engine without the CLI: `airlock serve` execs it
# from beside itself (an engine run from the CLI's binary maps ~7 MB more).
# bin/airlock-scan is the engine's secret scanner, run as a child while
# reviews need it, so the engine links no detector.
build: ui
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/airlock ./cmd/airlock
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/airlock-engine ./cmd/airlock-engine
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/airlock-scan ./cmd/airlock-scan
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o bin/airlock-init ./engine/fastexec/init

# The CLI for this machine: the binary, a man page per command (generated
# from the commands) and the shell completions, under PREFIX (DESTDIR for
# packaging). `man airlock-logs` then works; man-db finds /usr/local/share/man.
PREFIX ?= /usr/local
install: build
	rm -rf bin/man bin/completion && bin/airlock man bin/man && mkdir -p bin/completion
	for sh in bash zsh fish; do bin/airlock completion $$sh > bin/completion/airlock.$$sh || exit 1; done
	install -Dm755 bin/airlock $(DESTDIR)$(PREFIX)/bin/airlock
	install -Dm755 bin/airlock-init $(DESTDIR)$(PREFIX)/bin/airlock-init
	install -Dm755 bin/airlock-engine $(DESTDIR)$(PREFIX)/bin/airlock-engine
	install -Dm755 bin/airlock-scan $(DESTDIR)$(PREFIX)/bin/airlock-scan
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m644 bin/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -Dm644 bin/completion/airlock.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/airlock
	install -Dm644 bin/completion/airlock.zsh $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_airlock
	install -Dm644 bin/completion/airlock.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/airlock.fish

# The interface (frontend/: React, TypeScript, Vite), embedded in the
# engine (`airlock ui`) and the desktop app. npm ci installs exactly what
# package-lock.json says.
NPM_CI := { [ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund; }

ui: setup
	cd frontend && $(NPM_CI) && npm run build

ui-test: ui
	cd frontend && npm test

setup:
	scripts/setup.sh

# The main job on built-in defaults: default image, sample project, a
# scripted agent, the diff, a partial accept.
demo: setup build
	scripts/demo.sh

# Everything: format and vet, every package's tests including the
# integration tests against the real Docker daemon, the end-to-end CLI
# walkthrough, and the desktop build.
# -timeout is a guard against a hung test, not the suite's budget: the
# end-to-end tests of cmd/airlock run one after another against real
# Docker, and on a 2-core machine that is busy with the other packages
# they take 20 minutes and more (the package is the suite's long pole).
test: setup build lint desktop-check ui-test
	AIRLOCK_REQUIRE_INTEGRATION=1 $(GO) test -count=1 -timeout 50m ./...
	# The session suite again with every command through docker exec (the
	# path for TTYs, --user and containers made before the init), and with
	# no warm pool: every session made cold (the first run had the
	# engine's default pool of 2).
	AIRLOCK_REQUIRE_INTEGRATION=1 AIRLOCK_TEST_INIT=none AIRLOCK_TEST_POOL=0 $(GO) test -count=1 -timeout 15m ./engine
	$(MAKE) fuzz

# The fuzz targets, briefly (longer: make fuzz FUZZTIME=5m).
FUZZTIME ?= 10s
fuzz:
	for f in FuzzHunks FuzzParsePatch FuzzPathResolution; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./review || exit 1; \
	done
	$(GO) test -run '^$$' -fuzz '^FuzzParseLine$$' -fuzztime $(FUZZTIME) ./harness
	$(GO) test -run '^$$' -fuzz '^FuzzParseStatLine$$' -fuzztime $(FUZZTIME) ./engine/api
	$(GO) test -run '^$$' -fuzz '^FuzzResolve$$' -fuzztime $(FUZZTIME) ./confined
	$(GO) test -run '^$$' -fuzz '^FuzzGitObjects$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./review
	for f in FuzzClientHello FuzzParseHost; do $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./engine/egress || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzApplyLayer$$' -fuzztime $(FUZZTIME) ./snapshot
	$(GO) test -run '^$$' -fuzz '^FuzzIgnore$$' -fuzztime $(FUZZTIME) ./gitrules
	$(GO) test -run '^$$' -fuzz '^FuzzWindows$$' -fuzztime $(FUZZTIME) ./secretscan/gitleaks

test-short:
	$(GO) test -short ./...

# Go: gofmt and vet. The interface: ESLint (TypeScript and React hooks
# rules) and Prettier's check (`npm run format` in frontend/ fixes it).
lint: setup
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed: $$bad"; exit 1; fi
	$(GO) vet ./...
	cd frontend && $(NPM_CI) && npm run lint

# The desktop app (Wails) must keep building; it needs GTK and WebKit headers.
desktop-check:
	scripts/setup.sh desktop
	$(GO) build -tags desktop,production -o /dev/null .

desktop: ui
	scripts/setup.sh desktop
	$(GO) build -tags desktop,production -ldflags "$(LDFLAGS)" -o bin/airlock-desktop .

# The Wails CLI at the version go.mod pins, and `wails dev` (wails.json):
# the app against Vite's dev server, with hot reload, and the engine on
# $AIRLOCK_ENGINE. `wails build` makes what `make desktop` makes.
WAILS_VERSION = $(shell $(GO) list -m -f '{{.Version}}' github.com/wailsapp/wails/v2)
bin/wails: go.mod
	GOBIN=$(CURDIR)/bin $(GO) install github.com/wailsapp/wails/v2/cmd/wails@$(WAILS_VERSION)

desktop-dev: setup bin/wails
	scripts/setup.sh desktop
	bin/wails dev -m

# The desktop app for this machine's users: binary, menu entry, icon.
install-desktop: desktop
	install -Dm755 bin/airlock-desktop /usr/local/bin/airlock-desktop
	install -Dm644 build/linux/airlock.desktop /usr/local/share/applications/airlock.desktop
	install -Dm644 build/linux/airlock.svg /usr/local/share/icons/hicolor/scalable/apps/airlock.svg
	install -Dm644 build/linux/airlock.png /usr/local/share/icons/hicolor/256x256/apps/airlock.png

# Screenshots of the main screens into docs/screenshots (from the browser
# and desktop tests).
screenshots: build desktop
	mkdir -p docs/screenshots
	AIRLOCK_REQUIRE_INTEGRATION=1 AIRLOCK_SCREENSHOTS=$(CURDIR)/docs/screenshots $(GO) test -count=1 -run 'TestBrowser|TestDesktopSmoke' ./cmd/airlock

# Benchmarks against the obvious alternatives; writes docs/BENCHMARKS.md.
bench: setup build
	$(GO) run ./bench -airlock bin/airlock -out docs/BENCHMARKS.md

# The fault-injection soak (soak/): a seeded schedule of work and faults
# against an engine of its own, invariants checked after each fault.
# SEED=… runs a schedule again; the seed and the figures are printed.
SEED ?= 0
DURATION ?= 5m
soak: setup build
	$(GO) run ./soak/cmd -airlock bin/airlock -seed $(SEED) -duration $(DURATION)

clean:
	rm -rf bin frontend/node_modules
	find frontend/dist -mindepth 1 ! -name .gitkeep -delete
