#!/bin/sh
# Runs the command (`sidekick run`) and passes stop signals on to it. Exit status 2 is a
# configuration error: restarting cannot fix it, and `restart: unless-stopped` would loop
# while `docker compose up -d` said "Started". So the container stays up, idle and marked
# unhealthy (see the Dockerfile's HEALTHCHECK), with the reason in `docker compose logs`.
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
if [ "$code" = 2 ]; then
  touch /tmp/sidekick-config-error
  echo "sidekick: not restarting after a configuration error (the lines above): fix .env, then run: docker compose up -d" >&2
  trap 'exit 2' TERM INT
  while :; do sleep 3600 & wait $!; done
fi
exit "$code"
