#!/usr/bin/env bash
# Installs what the tests need besides Go: the PostgreSQL server programs
# (initdb, postgres), Redis (redis-server, redis-cli), and a C compiler for
# go test -race. Quiet, and does nothing, when they are all present.
#
# As root with apt-get (Debian, Ubuntu) it installs what is missing; the
# PostgreSQL and Redis services the packages may start are stopped and
# disabled again, since the tests run servers of their own on free ports.
# Elsewhere it says what is missing and how to get it, and fails.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }
have_initdb() { have initdb || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }

missing=() packages=()
# Servers named by these variables make the local programs unnecessary.
if [ -z "${TEST_DATABASE_URL:-}" ] && ! have_initdb; then
	missing+=(initdb) packages+=(postgresql)
fi
if [ -z "${TEST_REDIS_URL:-}" ] && ! { have redis-server && have redis-cli; }; then
	missing+=(redis-server) packages+=(redis-server)
fi
if ! have gcc && ! have cc; then
	missing+=("a C compiler (for go test -race)") packages+=(gcc libc6-dev)
fi
[ ${#packages[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! have apt-get; then
	{
		echo "install-test-deps: missing: ${missing[*]}"
		echo "  Debian/Ubuntu: sudo apt-get install postgresql redis-server gcc"
		echo "  macOS:         brew install postgresql redis"
		echo "  or name running servers in TEST_DATABASE_URL and TEST_REDIS_URL"
	} >&2
	exit 1
fi

echo "install-test-deps: installing ${packages[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${packages[@]}"; } >"$log" 2>&1; then
	cat "$log" >&2
	rm -f "$log"
	echo "install-test-deps: apt-get failed" >&2
	exit 1
fi
rm -f "$log"

# stop_service stops a service the install may have started and keeps it
# from starting at boot.
stop_service() {
	if have systemctl && [ -d /run/systemd/system ]; then
		systemctl disable --now "$1" >/dev/null 2>&1 || true
	elif [ -x "/etc/init.d/$1" ]; then
		"/etc/init.d/$1" stop >/dev/null 2>&1 || true
	fi
}
for p in "${packages[@]}"; do
	case $p in
	postgresql)
		stop_service postgresql
		# The cluster the package made: stopped, and started by hand only.
		if have pg_lsclusters; then
			pg_lsclusters --no-header 2>/dev/null | while read -r version cluster _ status _; do
				if [ "$status" = online ]; then
					pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true
				fi
				conf=/etc/postgresql/$version/$cluster/start.conf
				if [ -f "$conf" ]; then echo manual >"$conf"; fi
			done
		fi
		;;
	redis-server)
		stop_service redis-server
		;;
	esac
done

have_initdb || { echo "install-test-deps: initdb still missing after the install" >&2; exit 1; }
