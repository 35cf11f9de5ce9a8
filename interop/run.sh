#!/usr/bin/env bash
# Interoperability checks with clients nobody here wrote, for every example
# project in examples/ (a folder with a registry.yaml), each served by
# `registrum dev`:
#   1. openid-client (default client authentication) → token → jose at+jwt
#      verification → a record-host read (oauth.mjs);
#   2. oapi-codegen (types + client) on the served /openapi.json → go build;
#   3. openapi-typescript on the same document → tsc --noEmit --strict;
#   4. for a project with url hooks: the npm standardwebhooks package
#      verifies a real delivery (fired by `registrum tour`) to a destination
#      in mid-rotation, under the current and the previous key
#      (webhooks.mjs; dev restarted with --event-destinations and two key
#      files in its data folder's secrets).
# Versions are pinned: package-lock.json, go/go.mod. Prints one
# "interop: PASS" or "interop: FAIL" line at the end.
set -euo pipefail
cd "$(dirname "$0")"
interop=$(pwd)
root=$(cd .. && pwd)
start=$(date +%s)
work=$(mktemp -d)
devpid=""
rcvpid=""
finish() {
  status=$?
  if [ -n "$devpid" ]; then kill -INT "$devpid" 2>/dev/null || true; wait "$devpid" 2>/dev/null || true; fi
  if [ -n "$rcvpid" ]; then kill "$rcvpid" 2>/dev/null || true; wait "$rcvpid" 2>/dev/null || true; fi
  rm -rf "$work" "$interop/go/generated"
  if [ $status -eq 0 ]; then
    echo "interop: PASS ($(( $(date +%s) - start ))s)"
  else
    echo "interop: FAIL (see above; $(( $(date +%s) - start ))s)"
  fi
}
trap finish EXIT

npm ci --no-audit --no-fund --loglevel=error >/dev/null
(cd "$root" && go build -o "$work/registrum" ./cmd/registrum)

# start_dev PROJECT DATA OUT ERR [FLAG...] starts registrum dev and waits
# until it is ready (sets devpid).
start_dev() {
  local project=$1 data=$2 out=$3 err=$4
  shift 4
  (cd "$root" && exec "$work/registrum" dev --project "$project" --data "$data" --port 0 --issuer-port 0 --desk-port 0 --verifier-port 0 "$@" >"$out" 2>"$err") &
  devpid=$!
  for _ in $(seq 1 240); do
    grep -q '^Press Ctrl-C' "$out" 2>/dev/null && break
    kill -0 "$devpid" 2>/dev/null || { cat "$out" "$err" >&2; echo "interop: registrum dev ended" >&2; exit 1; }
    sleep 0.5
  done
  grep -q '^Press Ctrl-C' "$out" || { echo "interop: registrum dev not ready" >&2; exit 1; }
}

projects=0
for reg in "$root"/examples/*/registry.yaml; do
  project=$(dirname "$reg")
  name=$(basename "$project")
  projects=$((projects + 1))
  echo "interop: $name"
  data="$work/data-$name"
  out="$work/dev-$name.out"
  start_dev "$project" "$data" "$out" "$work/dev-$name.err"
  host=$(awk '$1 == "record" && $2 == "host" {print $3; exit}' "$out")
  issuer=$(awk '$1 == "token" && $2 == "issuer" {print $3; exit}' "$out")
  key="$data/issuer/client-keys/demo-standard.jwk"

  # 1. openid-client, jose, a record-host read.
  node oauth.mjs "$issuer" "$host" demo-standard "$key" "$data/issuer/issuer.yaml"

  curl -fsS "$host/openapi.json" -o "$work/$name.openapi.json"

  # 2. oapi-codegen → go build.
  pkg=$(echo "$name" | tr -cd 'a-z0-9')
  mkdir -p "go/generated/$pkg"
  (cd go && go tool oapi-codegen -package "$pkg" -generate types,client \
      -o "generated/$pkg/client.gen.go" "$work/$name.openapi.json" && go build "./generated/$pkg")
  echo "oapi-codegen: ok"

  # 3. openapi-typescript → tsc --strict.
  npx --no-install openapi-typescript "$work/$name.openapi.json" -o "$work/$pkg.ts" --silent
  npx --no-install tsc --noEmit --strict --skipLibCheck false --target es2022 --module nodenext "$work/$pkg.ts"
  echo "openapi-typescript: ok"

  kill -INT "$devpid"; wait "$devpid" || true; devpid=""

  # 4. standardwebhooks on real deliveries: the project's url hooks are
  # bound to webhooks.mjs, signed under two keys (a rotation), and the tour
  # fires one. Nothing was captured above, so rebinding is allowed.
  dests=$(grep -rhoE 'destinationId: *[a-z0-9-]+' "$project" --include='*.yaml' | awk '{print $2}' | sort -u)
  if [ -n "$dests" ]; then
    (umask 077; head -c 32 /dev/urandom >"$data/secrets/webhook-key-current"; head -c 48 /dev/urandom >"$data/secrets/webhook-key-previous")
    port="$work/webhooks-$name.port"
    node webhooks.mjs "$port" "$data/secrets/webhook-key-current" "$data/secrets/webhook-key-previous" 1 300 &
    rcvpid=$!
    for _ in $(seq 1 100); do [ -s "$port" ] && break; sleep 0.1; done
    [ -s "$port" ] || { echo "interop: the standardwebhooks receiver did not start" >&2; exit 1; }
    {
      echo "eventDestinations:"
      for d in $dests; do
        printf '  %s:\n    url: http://127.0.0.1:%s/registry-events\n    hmacSha256KeyRef: secret:file/webhook-key-current\n' "$d" "$(cat "$port")"
        printf '    previousHmacSha256KeyRef: secret:file/webhook-key-previous\n    classificationCeiling: restricted\n    network: loopback\n'
      done
    } >"$work/destinations-$name.yaml"
    start_dev "$project" "$data" "$out.2" "$work/dev-$name.err.2" --event-destinations "$work/destinations-$name.yaml"
    (cd "$root" && "$work/registrum" tour --data "$data" --no-pause >"$work/tour-$name.out" 2>&1) ||
      { tail -n 40 "$work/tour-$name.out" >&2; echo "interop: registrum tour failed" >&2; exit 1; }
    wait "$rcvpid" || { rcvpid=""; exit 1; }
    rcvpid=""
    kill -INT "$devpid"; wait "$devpid" || true; devpid=""
  fi
done
[ "$projects" -gt 0 ] || { echo "interop: no example project in examples/" >&2; exit 1; }
