#!/usr/bin/env bash
# The remote cache's store: `redis.sh install` installs Debian's redis-server where it is missing
# (as root, or through sudo); `redis.sh start [PORT]` runs one in the background for a fleet of
# compiling processes (then: export POLYDUCT_REMOTE_CACHE=redis://HOST:PORT/0).
set -euo pipefail
case "${1:-}" in
    install)
        if ! command -v redis-server > /dev/null; then
            sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
            $sudo apt-get update -qq && $sudo apt-get install -y -qq redis-server > /dev/null
        fi ;;
    start)
        port=${2:-6379}
        redis-server --port "$port" --save "" --appendonly no --daemonize yes \
            --maxmemory 2gb --maxmemory-policy allkeys-lru
        echo "export POLYDUCT_REMOTE_CACHE=redis://127.0.0.1:$port/0" ;;
    *)
        echo "usage: $0 install | start [PORT]" >&2; exit 2 ;;
esac
