#!/bin/sh
# Runs the command (`sidekick run`) and passes stop signals on to it. Exit status 2 is a
# configuration error: restarting cannot fix it, and `restart: unless-stopped` would loop
# while `docker compose up -d` said "Started". So the container stays up, idle and marked
# unhealthy (see the Dockerfile's HEALTHCHECK), with the reason in `docker compose logs`.
marker=${SIDEKICK_CONFIG_ERROR_MARKER:-/tmp/sidekick-config-error}
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
if [ "$code" = 2 ]; then
  # The stop trap comes before the marker: a stop that arrives once the marker is visible
  # must end the container, not be taken by the first trap and lost.
  sleeper=
  trap 'kill $sleeper 2>/dev/null; exit 2' TERM INT
  # The reason first: whoever sees the marker (the health check, a test) finds it logged.
  echo "sidekick: not restarting after a configuration error (the lines above): fix .env, then run: docker compose up -d" >&2
  touch "$marker"
  # The sleep holds none of our output: a stop that lands before `sleeper` is set leaves it
  # behind, and it must not keep the log pipe open (a reader would wait an hour for its end).
  while :; do sleep 3600 >/dev/null 2>&1 & sleeper=$!; wait $sleeper; done
fi
exit "$code"
