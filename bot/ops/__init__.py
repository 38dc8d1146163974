"""The operator's side of Sidekick, run from a shell rather than a chat: `sidekick setup`,
`doctor`, `status`/`logs`, `backup`/`restore`, `service install`, the checks made before
anything starts, and the reading of an older release's .env."""
