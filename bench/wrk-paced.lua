-- bench load --generator wrk: Debian's wrk (4.1) at a fixed arrival rate.
--
-- wrk has no rate of its own (wrk2 has one; it is not packaged for Debian). Here the schedule is
-- wrk's delay(): a connection whose answer came asks for the next free slot, slot k due at
-- start + k / rate, and sends when it is due, so the arrivals stay one every 1/rate s whichever
-- connection is free. wrk times each request from when it was sent; this script also records how
-- late each send was against its slot (the lateness wrk's own figures leave out: coordinated
-- omission), printed beside them.
--
-- Set by the bench, one thread (-t1): MEMSTREAM_RATE (requests a second), MEMSTREAM_METHOD,
-- MEMSTREAM_PATH, MEMSTREAM_AUTH (the Authorization header) and MEMSTREAM_BODIES (a file of
-- request bodies, one per line, sent in turn; absent for a GET).

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } memstream_timespec;
  int clock_gettime(int clk, memstream_timespec *tp);
]]
local ts = ffi.new("memstream_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local interval = 1000 / tonumber(os.getenv("MEMSTREAM_RATE"))
local method = os.getenv("MEMSTREAM_METHOD")
local path = os.getenv("MEMSTREAM_PATH")
local headers = { ["Authorization"] = os.getenv("MEMSTREAM_AUTH"), ["Content-Type"] = "application/json" }
local bodies = {}
local file = os.getenv("MEMSTREAM_BODIES")
if file and file ~= "" then
  for line in io.lines(file) do bodies[#bodies + 1] = line end
end

local next_due = nil -- the next free slot's due time, ms
local claimed = {}   -- due times handed out by delay() and not yet sent, oldest first
local head = 1
local sent = 0
late = {}            -- read by done() through thread:get

function delay()
  local t = now_ms()
  if not next_due then next_due = t end
  local due = next_due
  next_due = next_due + interval
  claimed[#claimed + 1] = due
  local wait = due - t
  if wait <= 0 then return 0 end
  -- wrk's timers count whole milliseconds: round up, never send early.
  return math.ceil(wait)
end

function request()
  local due = claimed[head]
  if due then
    claimed[head] = nil
    head = head + 1
    late[#late + 1] = math.max(0, now_ms() - due)
  end
  sent = sent + 1
  local body = nil
  if #bodies > 0 then body = bodies[(sent - 1) % #bodies + 1] end
  return wrk.format(method, path, headers, body)
end

local threads = {}
function setup(thread) threads[#threads + 1] = thread end

local function q(sorted, p)
  if #sorted == 0 then return 0 end
  return sorted[math.min(#sorted, math.floor(p / 100 * #sorted) + 1)]
end

function done(summary, latency, requests)
  local all = {}
  for _, t in ipairs(threads) do
    for _, x in ipairs(t:get("late")) do all[#all + 1] = x end
  end
  table.sort(all)
  local e = summary.errors
  io.write(string.format(
    'MEMSTREAM-WRK {"requests":%d,"durationUs":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,' ..
    '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"max":%d},"lateMs":{"n":%d,"p50":%.2f,"p90":%.2f,"p99":%.2f,"max":%.2f}}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    #all, q(all, 50), q(all, 90), q(all, 99), all[#all] or 0))
end
