-- wrk at a steady pace: each connection waits this many milliseconds before every request,
-- so -c 2 gives about 200 requests/s. wrk still measures each latency in microseconds.
local pause_ms = tonumber(os.getenv("PACE_MS") or "10")
function delay()
  return pause_ms
end
