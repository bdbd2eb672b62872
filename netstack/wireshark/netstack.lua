-- netstack.lua: Wireshark dissectors for the headers netstack puts on the wire.
--
-- LinkGuardian tags (EtherType 0xABCD), DTA reports (UDP 40040) and NACKs (UDP 40044), 1Pipe
-- (UDP 40100-40199), T/C-SACK (UDP 40200), TCD data packets and CNPs (UDP 40300) and TCD's
-- marks in the IP ECN field, netstack's authentication trailer and its software FCS trailer.
-- The layouts are those of docs/wire-formats.md; field names are netstack_<protocol>.<field>
-- with <field> the name the codec record in headers/*.py uses (docs/wireshark.md lists them).
--
-- Install: `netstack wireshark --install` (or copy this file into a Lua plugin folder), or
-- load it for one run: tshark -X lua_script:netstack.lua -r capture.pcap
--
-- Written for Wireshark 4.0 (Lua 5.2). Malformed or short input is reported as expert info;
-- every dissector runs under pcall so that a bug shows as an expert item, never a Lua error.

local NETSTACK_PLUGIN_VERSION = "0.1.0"

if set_plugin_info then
    set_plugin_info({
        version = NETSTACK_PLUGIN_VERSION,
        description = "netstack: LinkGuardian, DTA, 1Pipe, T/C-SACK and TCD dissectors",
        repository = "netstack (docs/wireshark.md)",
    })
end

local bit = bit32 or bit
local band, bor, bxor, rshift, lshift = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift

-- LuaBitOp returns signed results; bit32 unsigned. Normalise to 0 .. 2^32 - 1.
local function u32(x)
    if x < 0 then return x + 4294967296 end
    return x
end

local ETHERTYPE_LG = 0xABCD
local UDP_DTA = 40040
local UDP_DTA_NACK = 40044
local UDP_ONEPIPE_FIRST = 40100
local UDP_ONEPIPE_LAST = 40199
local UDP_TCSACK = 40200
local UDP_TCD = 40300
local AUTH_LEN = 17
local FCS_LEN = 4

------------------------------------------------------------------------------------------
-- CRC32 (IEEE 802.3), for the software FCS trailer
------------------------------------------------------------------------------------------

local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) == 1 then
            c = bxor(0xEDB88320, rshift(c, 1))
        else
            c = rshift(c, 1)
        end
    end
    CRC_TABLE[i] = u32(c)
end

-- feed the bytes of Lua string s into a running (inverted) CRC register
local function crc32_update(crc, s)
    local tbl = CRC_TABLE
    for i = 1, #s do
        crc = bxor(tbl[band(bxor(crc, s:byte(i)), 0xFF)], rshift(crc, 8))
    end
    return crc
end

local function crc32_finish(crc)
    return u32(bxor(crc, 0xFFFFFFFF))
end

------------------------------------------------------------------------------------------
-- helpers shared by the dissectors
------------------------------------------------------------------------------------------

-- the 48-bit / 64-bit values come back as UInt64; show them as decimal text
local function u64s(v)
    return tostring(v)
end

-- run body(tvb, pinfo, tree) under pcall; a failure becomes an expert item, not a Lua error
local function guarded(body, proto_tree_hint, internal_expert)
    return function(tvb, pinfo, tree)
        local ok, result = pcall(body, tvb, pinfo, tree)
        if ok then
            return result
        end
        local t = tree:add(proto_tree_hint, tvb())
        t:add_proto_expert_info(internal_expert, "netstack dissector failure: " .. tostring(result))
        return tvb:len()
    end
end

local function ef(abbrev, text, group, severity)
    return ProtoExpert.new(abbrev, text, group or expert.group.MALFORMED, severity or expert.severity.ERROR)
end

------------------------------------------------------------------------------------------
-- Authentication trailer (headers/auth.py): key_id:8 era:32 seq:32 mac:64
------------------------------------------------------------------------------------------

local p_auth = Proto("netstack_auth", "netstack authentication trailer")
local fa = {
    key_id = ProtoField.uint8("netstack_auth.key_id", "Key id", base.DEC),
    era = ProtoField.uint32("netstack_auth.era", "Era (sender start, s)", base.DEC),
    seq = ProtoField.uint32("netstack_auth.seq", "Sequence", base.DEC),
    mac = ProtoField.bytes("netstack_auth.mac", "MAC (AES-CMAC, first 8 bytes)"),
}
p_auth.fields = { fa.key_id, fa.era, fa.seq, fa.mac }
local ea = {
    truncated = ef("netstack_auth.truncated", "Authentication trailer truncated"),
    key_zero = ef("netstack_auth.key_zero", "Key id 0 is never in a key file", expert.group.PROTOCOL,
        expert.severity.WARN),
}
p_auth.experts = { ea.truncated, ea.key_zero }

-- add the trailer found at [off, off + 17) of tvb; returns its subtree
local function add_auth(tree, tvb, off, how)
    local t = tree:add(p_auth, tvb(off, AUTH_LEN))
    t:append_text(" (" .. how .. ")")
    t:add(fa.key_id, tvb(off, 1))
    t:add(fa.era, tvb(off + 1, 4))
    t:add(fa.seq, tvb(off + 5, 4))
    t:add(fa.mac, tvb(off + 9, 8))
    if tvb(off, 1):uint() == 0 then
        t:add_proto_expert_info(ea.key_zero)
    end
    t:append_text(string.format(", key %d, era %d, seq %d", tvb(off, 1):uint(), tvb(off + 1, 4):uint(),
        tvb(off + 5, 4):uint()))
    return t
end

------------------------------------------------------------------------------------------
-- Software FCS (headers/fcs.py): CRC32 of the frame, 4 bytes little-endian at its end.
-- A postdissector over the whole frame; "auto" shows it when the CRC matches.
------------------------------------------------------------------------------------------

local p_fcs = Proto("netstack_fcs", "netstack software FCS")
local ff = {
    fcs = ProtoField.uint32("netstack_fcs.fcs", "FCS (little-endian on the wire)", base.HEX),
    computed = ProtoField.uint32("netstack_fcs.computed", "Computed CRC32", base.HEX),
    status = ProtoField.bool("netstack_fcs.good", "FCS good"),
}
p_fcs.fields = { ff.fcs, ff.computed, ff.status }
local efcs = {
    bad = ef("netstack_fcs.bad", "Software FCS mismatch (a receiving switch port drops this frame)",
        expert.group.CHECKSUM, expert.severity.ERROR),
    short = ef("netstack_fcs.short", "Frame too short to carry a software FCS"),
}
p_fcs.experts = { efcs.bad, efcs.short }
local FCS_OFF, FCS_AUTO, FCS_ALWAYS = 0, 1, 2
p_fcs.prefs.mode = Pref.enum("Software FCS trailer", FCS_AUTO,
    "off: never look for it; auto: the frame has one when `netstack capture` marked it so in the packet " ..
    "comment (then a mismatch is flagged), or else when its last 4 bytes are the CRC32 of the rest; " ..
    "always: every frame carries one (a mismatch is flagged)",
    { { 1, "off", FCS_OFF }, { 2, "auto", FCS_AUTO }, { 3, "always", FCS_ALWAYS } }, false)

-- `netstack capture` writes this comment on every frame of a software-FCS link (netstack/capture.py)
local f_comment = Field.new("frame.comment")
local COMMENT_FCS = "netstack software FCS: last 4 bytes"
local COMMENT_FCS_LINK = "netstack software FCS link:"

-- what the packet comment says: true (trailer there), false (a software-FCS link, but no trailer)
-- or nil (no word on it)
local function fcs_comment()
    for _, c in ipairs({ f_comment() }) do
        local text = tostring(c.value)
        if text:sub(1, #COMMENT_FCS) == COMMENT_FCS then return true end
        if text:sub(1, #COMMENT_FCS_LINK) == COMMENT_FCS_LINK then return false end
    end
    return nil
end

-- does the frame (given as Lua strings: prefix bytes before tvb, then tvb) end with a correct FCS?
local function fcs_matches(prefix, tvb)
    local n = tvb:len()
    if n + #prefix <= FCS_LEN or n < FCS_LEN then
        return false
    end
    local crc = crc32_update(0xFFFFFFFF, prefix)
    if n > FCS_LEN then
        crc = crc32_update(crc, tvb:raw(0, n - FCS_LEN))
    end
    return crc32_finish(crc) == tvb(n - FCS_LEN, FCS_LEN):le_uint()
end

local function fcs_postdissect(tvb, pinfo, tree)
    local mode = p_fcs.prefs.mode
    if mode == FCS_OFF then
        return 0
    end
    local n = tvb:len()
    if n <= FCS_LEN + 14 then
        if mode == FCS_ALWAYS or (mode == FCS_AUTO and fcs_comment()) then
            tree:add(p_fcs, tvb()):add_proto_expert_info(efcs.short)
        end
        return 0
    end
    local said = fcs_comment()
    if mode == FCS_AUTO and said == false then
        return 0
    end
    local computed = crc32_finish(crc32_update(0xFFFFFFFF, tvb:raw(0, n - FCS_LEN)))
    local stored = tvb(n - FCS_LEN, FCS_LEN):le_uint()
    local good = computed == stored
    if not good and mode ~= FCS_ALWAYS and not said then
        return 0
    end
    local t = tree:add(p_fcs, tvb(n - FCS_LEN, FCS_LEN))
    t:add_le(ff.fcs, tvb(n - FCS_LEN, FCS_LEN))
    t:add(ff.computed, computed):set_generated()
    t:add(ff.status, good):set_generated()
    if good then
        t:append_text(string.format(": 0x%08x [correct]", stored))
    else
        t:append_text(string.format(": 0x%08x [incorrect, should be 0x%08x]", stored, computed))
        t:add_proto_expert_info(efcs.bad)
    end
    return 0
end
p_fcs.dissector = function(tvb, pinfo, tree)
    local ok, err = pcall(fcs_postdissect, tvb, pinfo, tree)
    if not ok then
        tree:add(p_fcs, tvb()):append_text(" [netstack dissector failure: " .. tostring(err) .. "]")
    end
end
register_postdissector(p_fcs)

-- Ethernet addresses of the current frame, to recompute the FCS from inside an EtherType dissector
local f_eth_dst = Field.new("eth.dst")
local f_eth_src = Field.new("eth.src")

local function last(fields)
    return fields[#fields]
end

-- FCS bytes at the end of an EtherType payload (0 or 4), by the netstack_fcs preference
local function fcs_len_of(tvb, ethertype)
    local mode = p_fcs.prefs.mode
    if mode == FCS_OFF then
        return 0
    end
    local said = fcs_comment()
    if mode == FCS_ALWAYS or said then
        return tvb:len() >= FCS_LEN and FCS_LEN or 0
    end
    if said == false then
        return 0
    end
    local dst, src = last({ f_eth_dst() }), last({ f_eth_src() })
    if not dst or not src then
        return 0
    end
    local prefix = dst.range:raw() .. src.range:raw() .. string.char(rshift(ethertype, 8), band(ethertype, 0xFF))
    return fcs_matches(prefix, tvb) and FCS_LEN or 0
end

------------------------------------------------------------------------------------------
-- LinkGuardian tags (headers/linkguardian.py), EtherType 0xABCD
------------------------------------------------------------------------------------------

local p_lg = Proto("netstack_lg", "netstack LinkGuardian")
local LG_TYPES = { [0] = "data", [1] = "leading ACK", [2] = "loss notification",
    [3] = "buffered copy (sender-internal)" }
local fl = {
    tag = ProtoField.none("netstack_lg.tag", "Tag"),
    type = ProtoField.uint8("netstack_lg.type", "Type", base.DEC, LG_TYPES, 0xC0),
    pad_data = ProtoField.uint8("netstack_lg.pad", "Pad (reserved)", base.HEX, nil, 0x20),
    era = ProtoField.uint8("netstack_lg.era", "Era", base.DEC, nil, 0x10),
    retx = ProtoField.bool("netstack_lg.retx", "Retransmission", 8, nil, 0x08),
    dummy = ProtoField.bool("netstack_lg.dummy", "Dummy (tail-loss probe)", 8, nil, 0x04),
    blocking = ProtoField.bool("netstack_lg.blocking", "Blocking (order-preserving)", 8, nil, 0x02),
    rx_buffered = ProtoField.bool("netstack_lg.rx_buffered", "Rx buffered", 8, nil, 0x01),
    piggybacked = ProtoField.bool("netstack_lg.piggybacked", "Piggybacked", 8, nil, 0x20),
    pad_ack = ProtoField.uint8("netstack_lg.ack_pad", "Pad (reserved)", base.HEX, nil, 0x0F),
    seq_no = ProtoField.uint16("netstack_lg.seq_no", "Sequence number", base.DEC),
    leading_ack = ProtoField.uint16("netstack_lg.leading_ack", "Leading ACK", base.DEC),
    hole_size = ProtoField.uint8("netstack_lg.hole_size", "Hole size", base.DEC),
    first_lost_seq = ProtoField.uint16("netstack_lg.first_lost_seq", "First lost seq_no", base.DEC),
    last_lost_seq = ProtoField.uint16("netstack_lg.last_lost_seq", "Last lost seq_no", base.DEC),
    next_type = ProtoField.uint16("netstack_lg.next_type", "Next type", base.HEX),
    padding = ProtoField.bytes("netstack_lg.padding", "Padding"),
}
p_lg.fields = { fl.tag, fl.type, fl.pad_data, fl.era, fl.retx, fl.dummy, fl.blocking, fl.rx_buffered,
    fl.piggybacked, fl.pad_ack, fl.seq_no, fl.leading_ack, fl.hole_size, fl.first_lost_seq, fl.last_lost_seq,
    fl.next_type, fl.padding }
local el = {
    truncated = ef("netstack_lg.truncated", "LinkGuardian tag truncated"),
    buffered = ef("netstack_lg.buffered", "Type 11 (buffered copy) is sender-internal and never crosses a link"),
    hole_zero = ef("netstack_lg.hole_zero", "hole_size 0 reports no loss"),
    pad_set = ef("netstack_lg.pad_set", "Reserved pad bits set (ignored on receipt)", expert.group.PROTOCOL,
        expert.severity.NOTE),
    no_auth = ef("netstack_lg.no_auth", "Frame too short for the authentication trailer"),
    internal = ef("netstack_lg.internal", "netstack dissector failure", expert.group.UNDECODED),
}
p_lg.experts = { el.truncated, el.buffered, el.hole_zero, el.pad_set, el.no_auth, el.internal }
p_lg.prefs.auth = Pref.bool("Control frames carry the authentication trailer", false,
    "Set when the capture comes from a deployment with a key file: frames whose first tag is a leading " ..
    "ACK or a loss notification then end with the 17-byte trailer (docs/wire-formats.md)")

local ethertype_table = DissectorTable.get("ethertype")
local data_dissector = Dissector.get("data")

-- one tag at off (bytes before limit); returns size, next_type, summary or nil on error
local function lg_tag(tvb, pinfo, tree, off, limit)
    local first = tvb(off, 1):uint()
    local kind = rshift(first, 6)
    local t = tree:add(fl.tag, tvb(off, math.min(kind == 2 and 8 or 5, limit - off)))
    t:set_text("LinkGuardian " .. LG_TYPES[kind] .. " tag")
    t:add(fl.type, tvb(off, 1))
    if kind == 3 then
        t:add_proto_expert_info(el.buffered)
        return nil
    end
    local size = (kind == 2) and 8 or 5
    if limit - off < size then
        t:add_proto_expert_info(el.truncated, string.format("LinkGuardian %s tag truncated: need %d bytes, have %d",
            LG_TYPES[kind], size, limit - off))
        return nil
    end
    local era = band(rshift(first, 4), 1)
    local num = tvb(off + 1, 2):uint()
    local nt = tvb(off + size - 2, 2):uint()
    local summary
    if kind == 0 then
        t:add(fl.pad_data, tvb(off, 1))
        t:add(fl.era, tvb(off, 1))
        t:add(fl.retx, tvb(off, 1))
        t:add(fl.dummy, tvb(off, 1))
        t:add(fl.blocking, tvb(off, 1))
        t:add(fl.rx_buffered, tvb(off, 1))
        t:add(fl.seq_no, tvb(off + 1, 2))
        if band(first, 0x20) ~= 0 then t:add_proto_expert_info(el.pad_set) end
        local flags = {}
        if band(first, 0x08) ~= 0 then flags[#flags + 1] = "retx" end
        if band(first, 0x04) ~= 0 then flags[#flags + 1] = "dummy" end
        if band(first, 0x02) == 0 then flags[#flags + 1] = "NB" end
        if band(first, 0x01) ~= 0 then flags[#flags + 1] = "rx_buffered" end
        summary = string.format("Data seq=%d era=%d", num, era)
        if #flags > 0 then summary = summary .. " [" .. table.concat(flags, ",") .. "]" end
    else
        t:add(fl.piggybacked, tvb(off, 1))
        t:add(fl.era, tvb(off, 1))
        t:add(fl.pad_ack, tvb(off, 1))
        t:add(fl.leading_ack, tvb(off + 1, 2))
        if band(first, 0x0F) ~= 0 then t:add_proto_expert_info(el.pad_set) end
        local how = band(first, 0x20) ~= 0 and "piggybacked" or "courier"
        if kind == 1 then
            summary = string.format("Leading ACK %d era=%d (%s)", num, era, how)
        else
            local hole = tvb(off + 3, 1):uint()
            local lost = tvb(off + 4, 2):uint()
            t:add(fl.hole_size, tvb(off + 3, 1))
            t:add(fl.first_lost_seq, tvb(off + 4, 2))
            if hole == 0 then
                t:add_proto_expert_info(el.hole_zero)
            else
                t:add(fl.last_lost_seq, (lost + hole - 1) % 65536):set_generated()
            end
            summary = string.format("Loss notification: lost %d..%d (%d), leading ACK %d era=%d (%s)", lost,
                (lost + hole - 1) % 65536, hole, num, era, how)
        end
    end
    local nti = t:add(fl.next_type, tvb(off + size - 2, 2))
    if nt == 0 then nti:append_text(" (nothing follows)") end
    t:append_text(": " .. summary)
    return size, nt, summary
end

local function lg_dissect(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "LinkGuardian"
    local root = tree:add(p_lg, tvb())
    if n < 1 then
        root:add_proto_expert_info(el.truncated, "LinkGuardian tag truncated: no bytes after the EtherType")
        return n
    end
    local fcs = fcs_len_of(tvb, ETHERTYPE_LG)
    local limit = n - fcs
    local first_kind = rshift(tvb(0, 1):uint(), 6)
    local auth_off = nil
    if p_lg.prefs.auth and (first_kind == 1 or first_kind == 2) then
        if limit >= AUTH_LEN + 5 then
            auth_off = limit - AUTH_LEN
            limit = auth_off
        else
            root:add_proto_expert_info(el.no_auth)
        end
    end
    local off, summaries, nt = 0, {}, ETHERTYPE_LG
    while nt == ETHERTYPE_LG do
        if off >= limit then
            root:add_proto_expert_info(el.truncated, "LinkGuardian tag truncated: next_type 0xabcd but no tag")
            nt = nil
            break
        end
        local size, next_type, summary = lg_tag(tvb, pinfo, root, off, limit)
        if not size then
            nt = nil
            break
        end
        summaries[#summaries + 1] = summary
        off = off + size
        nt = next_type
    end
    pinfo.cols.info = "LG " .. table.concat(summaries, "; ")
    root:append_text(": " .. table.concat(summaries, "; "))
    if nt == nil then
        if off < limit then data_dissector:call(tvb(off, limit - off):tvb(), pinfo, tree) end
    elseif nt == 0 then
        if off < limit then root:add(fl.padding, tvb(off, limit - off)) end
    elseif off < limit then
        -- what follows is shown after the tags' summary; the table falls back to "data" itself
        pinfo.cols.info:append(" | ")
        pinfo.cols.info:fence()
        -- a malformed inner packet is already flagged by its own dissector (try raises after
        -- showing it); it is not a failure of ours
        pcall(ethertype_table.try, ethertype_table, nt, tvb(off, limit - off):tvb(), pinfo, tree)
    else
        root:add_proto_expert_info(el.truncated, string.format("next_type 0x%04x but nothing follows", nt))
    end
    if auth_off then
        add_auth(root, tvb, auth_off, "on a LinkGuardian control frame")
    end
    return n
end
p_lg.dissector = guarded(lg_dissect, p_lg, el.internal)
ethertype_table:add(ETHERTYPE_LG, p_lg)

------------------------------------------------------------------------------------------
-- DTA reports (UDP dst 40040) and NACKs (UDP dst 40044), headers/dta.py
------------------------------------------------------------------------------------------

local p_dta = Proto("netstack_dta", "netstack DTA report")
local DTA_OPCODES = { [1] = "Key-Write", [2] = "Append", [3] = "Key-Increment", [4] = "Postcarder",
    [5] = "Sketch-Merge" }
local DTA_MERGE = { [0] = "SUM", [1] = "MAX" }
local fd = {
    opcode = ProtoField.uint8("netstack_dta.opcode", "Opcode", base.HEX, DTA_OPCODES),
    seqnum = ProtoField.uint8("netstack_dta.seqnum", "Sequence number", base.DEC),
    immediate = ProtoField.uint8("netstack_dta.immediate", "Immediate", base.DEC, nil, 0x80),
    retransmittable = ProtoField.uint8("netstack_dta.retransmittable", "Retransmittable", base.DEC, nil, 0x40),
    reserved = ProtoField.uint8("netstack_dta.reserved", "Reserved", base.HEX, nil, 0x3F),
    redundancy = ProtoField.uint8("netstack_dta.redundancy", "Redundancy", base.DEC),
    key = ProtoField.uint32("netstack_dta.key", "Key", base.DEC),
    data = ProtoField.uint32("netstack_dta.data", "Data", base.DEC),
    words = ProtoField.uint32("netstack_dta.words", "Data words (k)", base.DEC),
    list_id = ProtoField.uint32("netstack_dta.list_id", "List id", base.DEC),
    counter = ProtoField.uint64("netstack_dta.counter", "Counter", base.DEC),
    hop = ProtoField.uint8("netstack_dta.hop", "Hop", base.DEC),
    reporter_id = ProtoField.uint16("netstack_dta.reporter_id", "Reporter id", base.DEC),
    sketch_id = ProtoField.uint16("netstack_dta.sketch_id", "Sketch id", base.DEC),
    column = ProtoField.uint32("netstack_dta.column", "Column", base.DEC),
    rows = ProtoField.uint8("netstack_dta.rows", "Rows", base.DEC),
    merge = ProtoField.uint8("netstack_dta.merge", "Merge function", base.DEC, DTA_MERGE),
    counters = ProtoField.uint32("netstack_dta.counters", "Counter", base.DEC),
    extra = ProtoField.bytes("netstack_dta.extra", "Unexpected trailing bytes"),
}
p_dta.fields = { fd.opcode, fd.seqnum, fd.immediate, fd.retransmittable, fd.reserved, fd.redundancy, fd.key,
    fd.data, fd.words, fd.list_id, fd.counter, fd.hop, fd.reporter_id, fd.sketch_id, fd.column, fd.rows,
    fd.merge, fd.counters, fd.extra }
local ed = {
    truncated = ef("netstack_dta.truncated", "DTA report truncated"),
    opcode = ef("netstack_dta.unknown_opcode", "Unknown DTA opcode"),
    length = ef("netstack_dta.bad_length", "DTA primitive does not fill the UDP payload exactly"),
    redundancy = ef("netstack_dta.redundancy_zero", "Redundancy 0 writes nothing"),
    rows = ef("netstack_dta.rows_zero", "rows 0: a column has at least one counter"),
    merge = ef("netstack_dta.unknown_merge", "Unknown merge function (0 SUM, 1 MAX)"),
    internal = ef("netstack_dta.internal", "netstack dissector failure", expert.group.UNDECODED),
}
p_dta.experts = { ed.truncated, ed.opcode, ed.length, ed.redundancy, ed.rows, ed.merge, ed.internal }

local DTA_FIXED = { [2] = 8, [3] = 13, [4] = 9 }

-- the body size of the primitive at o (bytes after the base) given rest bytes, and whether a
-- 17-byte authentication trailer follows it (the length rules make it detectable)
local function dta_body(tvb, opcode, o, rest)
    local fixed = DTA_FIXED[opcode]
    if fixed then
        if rest == fixed + AUTH_LEN then return fixed, true end
        return fixed, false
    elseif opcode == 1 then
        local words = rest - 5
        if words >= 4 and words % 4 == 0 then return rest, false end
        if words >= 4 + AUTH_LEN and (words - AUTH_LEN) % 4 == 0 then return rest - AUTH_LEN, true end
        return rest, false
    elseif opcode == 5 then
        if rest < 10 then return 10, false end
        local size = 10 + 4 * tvb(o + 8, 1):uint()
        return size, rest == size + AUTH_LEN
    end
    return nil, false
end

local function dta_primitive(tvb, t, opcode, o, size)
    local s
    if opcode == 1 then
        local k = math.floor((size - 5) / 4)
        t:add(fd.redundancy, tvb(o, 1))
        t:add(fd.key, tvb(o + 1, 4))
        t:add(fd.words, k):set_generated()
        for i = 0, k - 1 do t:add(fd.data, tvb(o + 5 + 4 * i, 4)) end
        s = string.format("redundancy=%d key=%d k=%d", tvb(o, 1):uint(), tvb(o + 1, 4):uint(), k)
    elseif opcode == 2 then
        t:add(fd.list_id, tvb(o, 4))
        t:add(fd.data, tvb(o + 4, 4))
        s = string.format("list=%d data=%d", tvb(o, 4):uint(), tvb(o + 4, 4):uint())
    elseif opcode == 3 then
        t:add(fd.redundancy, tvb(o, 1))
        t:add(fd.key, tvb(o + 1, 4))
        t:add(fd.counter, tvb(o + 5, 8))
        s = string.format("redundancy=%d key=%d counter=%s", tvb(o, 1):uint(), tvb(o + 1, 4):uint(),
            u64s(tvb(o + 5, 8):uint64()))
    elseif opcode == 4 then
        t:add(fd.key, tvb(o, 4))
        t:add(fd.hop, tvb(o + 4, 1))
        t:add(fd.data, tvb(o + 5, 4))
        s = string.format("key=%d hop=%d data=%d", tvb(o, 4):uint(), tvb(o + 4, 1):uint(), tvb(o + 5, 4):uint())
    else
        local rows = tvb(o + 8, 1):uint()
        t:add(fd.reporter_id, tvb(o, 2))
        t:add(fd.sketch_id, tvb(o + 2, 2))
        t:add(fd.column, tvb(o + 4, 4))
        t:add(fd.rows, tvb(o + 8, 1))
        local mi = t:add(fd.merge, tvb(o + 9, 1))
        if not DTA_MERGE[tvb(o + 9, 1):uint()] then mi:add_proto_expert_info(ed.merge) end
        for i = 0, rows - 1 do t:add(fd.counters, tvb(o + 10 + 4 * i, 4)) end
        s = string.format("reporter=%d sketch=%d column=%d rows=%d", tvb(o, 2):uint(), tvb(o + 2, 2):uint(),
            tvb(o + 4, 4):uint(), rows)
    end
    if (opcode == 1 or opcode == 3) and tvb(o, 1):uint() == 0 then t:add_proto_expert_info(ed.redundancy) end
    if opcode == 5 and tvb(o + 8, 1):uint() == 0 then t:add_proto_expert_info(ed.rows) end
    return s
end

local function dta_report(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "DTA"
    local t = tree:add(p_dta, tvb())
    if n < 3 then
        t:add_proto_expert_info(ed.truncated, string.format("DTA report truncated: need 3 bytes, have %d", n))
        pinfo.cols.info = "DTA report [truncated]"
        return n
    end
    local opcode = tvb(0, 1):uint()
    t:add(fd.opcode, tvb(0, 1))
    t:add(fd.seqnum, tvb(1, 1))
    t:add(fd.immediate, tvb(2, 1))
    t:add(fd.retransmittable, tvb(2, 1))
    t:add(fd.reserved, tvb(2, 1))
    local name = DTA_OPCODES[opcode]
    if not name then
        t:add_proto_expert_info(ed.opcode, string.format("Unknown DTA opcode 0x%02x", opcode))
        pinfo.cols.info = string.format("DTA opcode 0x%02x [unknown]", opcode)
        if n > 3 then data_dissector:call(tvb(3):tvb(), pinfo, tree) end
        return n
    end
    local size, sealed = dta_body(tvb, opcode, 3, n - 3)
    local info = string.format("DTA %s seq=%d", name, tvb(1, 1):uint())
    if n - 3 < size or (opcode == 1 and size < 9) then
        local need = math.max(size, opcode == 1 and 9 or size)
        t:add_proto_expert_info(ed.truncated, string.format("DTA %s truncated: need %d bytes after the base, have %d",
            name, need, n - 3))
        pinfo.cols.info = info .. " [truncated]"
        return n
    end
    local st = t:add(p_dta, tvb(3, size))
    st:set_text(name)
    local s = dta_primitive(tvb, st, opcode, 3, size)
    info = info .. " " .. s
    local used = 3 + size
    if sealed then
        add_auth(t, tvb, used, "detected from the length")
        used = used + AUTH_LEN
        info = info .. " [sealed]"
    elseif used < n or (opcode == 1 and (size - 5) % 4 ~= 0) then
        local extra = (opcode == 1) and (size - 5) % 4 or n - used
        local ei = t:add(fd.extra, tvb(n - extra, extra))
        ei:add_proto_expert_info(ed.length, string.format("%d bytes the %s primitive does not account for", extra,
            name))
    end
    t:append_text(": " .. name .. " " .. s)
    pinfo.cols.info = info
    return n
end

local p_nack = Proto("netstack_dta_nack", "netstack DTA NACK")
local fn = {
    seqnum = ProtoField.uint8("netstack_dta_nack.seqnum", "Last in-order seqnum", base.DEC),
    nack = ProtoField.uint8("netstack_dta_nack.nack", "NACK", base.DEC, nil, 0x80),
    sketch = ProtoField.uint8("netstack_dta_nack.sketch", "Sketch extension", base.DEC, nil, 0x40),
    reserved = ProtoField.uint8("netstack_dta_nack.reserved", "Reserved", base.HEX, nil, 0x3F),
    reporter_id = ProtoField.uint16("netstack_dta_nack.reporter_id", "Reporter id", base.DEC),
    sketch_id = ProtoField.uint16("netstack_dta_nack.sketch_id", "Sketch id", base.DEC),
    expected_column = ProtoField.uint32("netstack_dta_nack.expected_column", "Expected column", base.DEC),
    ignored = ProtoField.bytes("netstack_dta_nack.ignored", "Ignored trailing bytes"),
}
p_nack.fields = { fn.seqnum, fn.nack, fn.sketch, fn.reserved, fn.reporter_id, fn.sketch_id, fn.expected_column,
    fn.ignored }
local en = {
    truncated = ef("netstack_dta_nack.truncated", "DTA NACK truncated"),
    internal = ef("netstack_dta_nack.internal", "netstack dissector failure", expert.group.UNDECODED),
}
p_nack.experts = { en.truncated, en.internal }

local function dta_nack(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "DTA"
    local t = tree:add(p_nack, tvb())
    if n < 2 then
        t:add_proto_expert_info(en.truncated, string.format("DTA NACK truncated: need 2 bytes, have %d", n))
        pinfo.cols.info = "DTA NACK [truncated]"
        return n
    end
    t:add(fn.seqnum, tvb(0, 1))
    t:add(fn.nack, tvb(1, 1))
    t:add(fn.sketch, tvb(1, 1))
    t:add(fn.reserved, tvb(1, 1))
    local seq = tvb(0, 1):uint()
    local info = string.format("DTA %s after seqnum %d", band(tvb(1, 1):uint(), 0x80) ~= 0 and "NACK" or "ACK", seq)
    local used = 2
    if band(tvb(1, 1):uint(), 0x40) ~= 0 then
        if n < 10 then
            t:add_proto_expert_info(en.truncated, string.format(
                "DTA NACK sketch extension truncated: need 10 bytes, have %d", n))
            pinfo.cols.info = info .. " [truncated]"
            return n
        end
        t:add(fn.reporter_id, tvb(2, 2))
        t:add(fn.sketch_id, tvb(4, 2))
        t:add(fn.expected_column, tvb(6, 4))
        info = info .. string.format(", sketch %d of reporter %d: restart from column %d", tvb(4, 2):uint(),
            tvb(2, 2):uint(), tvb(6, 4):uint())
        used = 10
    end
    if used < n then t:add(fn.ignored, tvb(used, n - used)) end
    t:append_text(": " .. info)
    pinfo.cols.info = info
    return n
end

-- reports are recognised by the UDP destination port 40040, NACKs by destination 40044
p_dta.dissector = guarded(function(tvb, pinfo, tree)
    if pinfo.dst_port ~= UDP_DTA then return 0 end
    return dta_report(tvb, pinfo, tree)
end, p_dta, ed.internal)
p_nack.dissector = guarded(function(tvb, pinfo, tree)
    if pinfo.dst_port ~= UDP_DTA_NACK then return 0 end
    return dta_nack(tvb, pinfo, tree)
end, p_nack, en.internal)
local udp_table = DissectorTable.get("udp.port")
udp_table:add(UDP_DTA, p_dta)
udp_table:add(UDP_DTA_NACK, p_nack)

------------------------------------------------------------------------------------------
-- 1Pipe (UDP 40100-40199), headers/onepipe.py and netstack/onepipe/ctlwire.py
------------------------------------------------------------------------------------------

local p_op = Proto("netstack_1pipe", "netstack 1Pipe")
local OP_CODES = { [0x01] = "DATA", [0x02] = "PREPARE", [0x03] = "ACK", [0x04] = "NAK", [0x05] = "BEACON",
    [0x06] = "COMMIT", [0x07] = "RECALL", [0x08] = "RECALL_ACK", [0x10] = "REGISTER", [0x11] = "FAILURE_REPORT",
    [0x12] = "FAILURE_NOTICE", [0x13] = "CALLBACK_DONE", [0x14] = "RESUME", [0x15] = "RELAY",
    [0x16] = "PROBE" }
local fo = {
    msg_ts = ProtoField.uint64("netstack_1pipe.msg_ts", "Message timestamp (ns mod 2^48)", base.DEC),
    be_barrier = ProtoField.uint64("netstack_1pipe.be_barrier", "Best-effort barrier", base.DEC),
    commit_barrier = ProtoField.uint64("netstack_1pipe.commit_barrier", "Commit barrier", base.DEC),
    psn = ProtoField.uint32("netstack_1pipe.psn", "PSN", base.DEC),
    opcode = ProtoField.uint8("netstack_1pipe.opcode", "Opcode", base.HEX, OP_CODES),
    flags = ProtoField.uint8("netstack_1pipe.flags", "Flags", base.HEX),
    eom = ProtoField.bool("netstack_1pipe.flags.eom", "EOM (last fragment)", 8, nil, 0x01),
    ece = ProtoField.bool("netstack_1pipe.flags.ece", "ECE (ECN echo)", 8, nil, 0x02),
    som = ProtoField.bool("netstack_1pipe.flags.som", "SOM (first fragment)", 8, nil, 0x04),
    recover = ProtoField.bool("netstack_1pipe.flags.recover", "RECOVER (REGISTER)", 8, nil, 0x08),
    replay = ProtoField.bool("netstack_1pipe.flags.replay", "REPLAY (FAILURE_NOTICE)", 8, nil, 0x10),
    fragment = ProtoField.bytes("netstack_1pipe.fragment", "Message fragment"),
    ack_bitmap = ProtoField.bytes("netstack_1pipe.ack_bitmap", "Given-up bitmap"),
    given_up_psn = ProtoField.uint32("netstack_1pipe.given_up_psn", "Given-up PSN", base.DEC),
    nak_count = ProtoField.uint32("netstack_1pipe.nak_count", "Run length", base.DEC),
    recall_count = ProtoField.uint32("netstack_1pipe.recall_count", "Recalled PSN count", base.DEC),
    scattering_seq = ProtoField.uint64("netstack_1pipe.scattering_seq", "Scattering seq", base.DEC),
    revision = ProtoField.uint64("netstack_1pipe.revision", "Failure revision", base.DEC),
    addr_ip = ProtoField.ipv4("netstack_1pipe.addr_ip", "Process address"),
    addr_port = ProtoField.uint16("netstack_1pipe.addr_port", "Process UDP port", base.DEC),
    incarnation = ProtoField.uint32("netstack_1pipe.incarnation", "Incarnation", base.DEC),
    notices = ProtoField.uint32("netstack_1pipe.notices", "Replayed notices", base.DEC),
    recalls = ProtoField.uint32("netstack_1pipe.recalls", "Relayed recalls", base.DEC),
    payload = ProtoField.bytes("netstack_1pipe.payload", "Payload"),
    relayed = ProtoField.none("netstack_1pipe.relayed", "Relayed 1Pipe packet"),
}
p_op.fields = { fo.msg_ts, fo.be_barrier, fo.commit_barrier, fo.psn, fo.opcode, fo.flags, fo.eom, fo.ece, fo.som,
    fo.recover, fo.replay, fo.fragment, fo.ack_bitmap, fo.given_up_psn, fo.nak_count, fo.recall_count,
    fo.scattering_seq, fo.revision, fo.addr_ip, fo.addr_port, fo.incarnation, fo.notices, fo.recalls, fo.payload,
    fo.relayed }
local eo = {
    truncated = ef("netstack_1pipe.truncated", "1Pipe packet truncated"),
    opcode = ef("netstack_1pipe.unknown_opcode", "Unknown 1Pipe opcode"),
    payload = ef("netstack_1pipe.bad_payload", "Payload does not fit the opcode"),
    relay = ef("netstack_1pipe.bad_relay", "RELAY may carry only PREPARE, ACK, NAK, RECALL, RECALL_ACK"),
    no_auth = ef("netstack_1pipe.no_auth", "Datagram too short for the authentication trailer"),
    internal = ef("netstack_1pipe.internal", "netstack dissector failure", expert.group.UNDECODED),
}
p_op.experts = { eo.truncated, eo.opcode, eo.payload, eo.relay, eo.no_auth, eo.internal }
p_op.prefs.auth = Pref.bool("Datagrams carry the authentication trailer", false,
    "Set when the capture comes from a deployment with a key file: every 1Pipe datagram then ends with " ..
    "the 17-byte trailer. Off, the trailer is still shown where the length proves it (a fixed-size " ..
    "message 17 bytes too long)")

-- payload sizes of the fixed-size messages (REGISTER: request 8, reply 26)
local OP_FIXED = { [0x05] = { 0 }, [0x06] = { 0 }, [0x07] = { 12 }, [0x08] = { 12 }, [0x10] = { 8, 26 },
    [0x11] = { 6 }, [0x12] = { 10 }, [0x13] = { 0 } }
local RELAYABLE = { [0x02] = true, [0x03] = true, [0x04] = true, [0x07] = true, [0x08] = true }

local function op_addr(tvb, t, o)
    t:add(fo.addr_ip, tvb(o, 4))
    t:add(fo.addr_port, tvb(o + 4, 2))
    return string.format("%s:%d", tostring(tvb(o, 4):ipv4()), tvb(o + 4, 2):uint())
end

local function payload_error(t, opcode, len)
    t:add_proto_expert_info(eo.payload, string.format("%s with a %d-byte payload", OP_CODES[opcode], len))
end

local op_packet -- forward declaration (RELAY recurses once)

-- the payload of opcode at [o, o + len); returns a summary
local function op_payload(tvb, pinfo, t, opcode, psn, o, len, depth)
    local fixed = OP_FIXED[opcode]
    if fixed then
        local fits = false
        for _, size in ipairs(fixed) do if size == len then fits = true end end
        if not fits then
            payload_error(t, opcode, len)
            if len > 0 then t:add(fo.payload, tvb(o, len)) end
            return ""
        end
    end
    if len == 0 then return "" end
    if opcode == 0x01 or opcode == 0x02 then
        t:add(fo.fragment, tvb(o, len))
        return string.format(" %d bytes", len)
    elseif opcode == 0x03 then
        t:add(fo.ack_bitmap, tvb(o, len))
        local lost = {}
        for i = 0, math.min(len, 64) * 8 - 1 do
            local byte = tvb(o + math.floor(i / 8), 1):uint()
            if band(byte, lshift(1, i % 8)) ~= 0 then
                local p = (psn - 1 - i) % 4294967296
                t:add(fo.given_up_psn, tvb(o + math.floor(i / 8), 1), p):set_generated()
                lost[#lost + 1] = tostring(p)
            end
        end
        return #lost > 0 and " given up: " .. table.concat(lost, ",") or ""
    elseif opcode == 0x04 then
        if len ~= 4 then
            payload_error(t, opcode, len)
            t:add(fo.payload, tvb(o, len))
            return ""
        end
        t:add(fo.nak_count, tvb(o, 4))
        return string.format(" run of %d", tvb(o, 4):uint())
    elseif opcode == 0x07 or opcode == 0x08 then
        t:add(fo.recall_count, tvb(o, 4))
        t:add(fo.scattering_seq, tvb(o + 4, 8))
        return string.format(" %d PSNs, scattering %s", tvb(o, 4):uint(), u64s(tvb(o + 4, 8):uint64()))
    elseif opcode == 0x10 then
        if len == 8 then
            t:add(fo.revision, tvb(o, 8))
            return " request, revision seen " .. u64s(tvb(o, 8):uint64())
        end
        local a = op_addr(tvb, t, o)
        t:add(fo.incarnation, tvb(o + 6, 4))
        t:add(fo.revision, tvb(o + 10, 8))
        t:add(fo.notices, tvb(o + 18, 4))
        t:add(fo.recalls, tvb(o + 22, 4))
        return string.format(" reply %s incarnation %d", a, tvb(o + 6, 4):uint())
    elseif opcode == 0x11 then
        return " " .. op_addr(tvb, t, o)
    elseif opcode == 0x12 then
        local a = op_addr(tvb, t, o)
        t:add(fo.incarnation, tvb(o + 6, 4))
        return string.format(" %s incarnation %d", a, tvb(o + 6, 4):uint())
    elseif opcode == 0x15 then
        if len < 6 then
            payload_error(t, opcode, len)
            t:add(fo.payload, tvb(o, len))
            return ""
        end
        local a = op_addr(tvb, t, o)
        if len == 6 then
            t:add_proto_expert_info(eo.truncated, "RELAY without a relayed packet")
            return " " .. a
        end
        local rt = t:add(fo.relayed, tvb(o + 6, len - 6))
        if depth > 0 then
            rt:add_proto_expert_info(eo.relay, "RELAY inside a RELAY")
            rt:add(fo.payload, tvb(o + 6, len - 6))
            return " " .. a
        end
        local inner = op_packet(tvb, pinfo, rt, o + 6, len - 6, depth + 1)
        if len - 6 >= 24 and not RELAYABLE[tvb(o + 6 + 22, 1):uint()] then rt:add_proto_expert_info(eo.relay) end
        rt:set_text("Relayed 1Pipe packet: " .. inner)
        return " " .. a .. " [" .. inner .. "]"
    end
    t:add(fo.payload, tvb(o, len))
    return string.format(" %d bytes", len)
end

-- one 1Pipe packet at [o, o + len) into tree t; returns a summary
op_packet = function(tvb, pinfo, t, o, len, depth)
    if len < 24 then
        t:add_proto_expert_info(eo.truncated, string.format("1Pipe packet truncated: need 24 bytes, have %d", len))
        if len > 0 then t:add(fo.payload, tvb(o, len)) end
        return "[truncated]"
    end
    local opcode = tvb(o + 22, 1):uint()
    local psn = tvb(o + 18, 4):uint()
    t:add(fo.msg_ts, tvb(o, 6))
    t:add(fo.be_barrier, tvb(o + 6, 6))
    t:add(fo.commit_barrier, tvb(o + 12, 6))
    t:add(fo.psn, tvb(o + 18, 4))
    local oi = t:add(fo.opcode, tvb(o + 22, 1))
    local ft = t:add(fo.flags, tvb(o + 23, 1))
    ft:add(fo.eom, tvb(o + 23, 1))
    ft:add(fo.ece, tvb(o + 23, 1))
    ft:add(fo.som, tvb(o + 23, 1))
    ft:add(fo.recover, tvb(o + 23, 1))
    ft:add(fo.replay, tvb(o + 23, 1))
    local name = OP_CODES[opcode]
    if not name then
        oi:add_proto_expert_info(eo.opcode, string.format("Unknown 1Pipe opcode 0x%02x", opcode))
        if len > 24 then t:add(fo.payload, tvb(o + 24, len - 24)) end
        return string.format("opcode 0x%02x [unknown]", opcode)
    end
    local s = string.format("%s psn=%d ts=%s be=%s commit=%s", name, psn, u64s(tvb(o, 6):uint64()),
        u64s(tvb(o + 6, 6):uint64()), u64s(tvb(o + 12, 6):uint64()))
    return s .. op_payload(tvb, pinfo, t, opcode, psn, o + 24, len - 24, depth)
end

-- is the trailer there? (pref, or a fixed-size message exactly 17 bytes too long)
local function op_sealed(tvb, n)
    if p_op.prefs.auth then return true end
    if n < 24 + AUTH_LEN then return false end
    local fixed = OP_FIXED[tvb(22, 1):uint()]
    if not fixed then return false end
    for _, size in ipairs(fixed) do
        if n == 24 + size + AUTH_LEN then return true end
    end
    return false
end

local function op_dissect(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "1Pipe"
    local t = tree:add(p_op, tvb())
    local len = n
    local sealed = op_sealed(tvb, n)
    if sealed and n < 24 + AUTH_LEN then
        t:add_proto_expert_info(eo.no_auth)
        sealed = false
    end
    if sealed then len = n - AUTH_LEN end
    local s = op_packet(tvb, pinfo, t, 0, len, 0)
    if sealed then
        add_auth(t, tvb, len, p_op.prefs.auth and "preference" or "detected from the length")
        s = s .. " [sealed]"
    end
    t:append_text(": " .. s)
    pinfo.cols.info = "1Pipe " .. s
    return n
end
p_op.dissector = guarded(op_dissect, p_op, eo.internal)
udp_table:add(string.format("%d-%d", UDP_ONEPIPE_FIRST, UDP_ONEPIPE_LAST), p_op)

------------------------------------------------------------------------------------------
-- T/C-SACK data and ACK (UDP 40200), headers/tcsack.py
------------------------------------------------------------------------------------------

local p_tcs = Proto("netstack_tcsack", "netstack T/C-SACK")
local TCS_KINDS = { [1] = "DATA", [2] = "ACK" }
local ft_ = {
    kind = ProtoField.uint8("netstack_tcsack.kind", "Kind", base.DEC, TCS_KINDS),
    flags = ProtoField.uint8("netstack_tcsack.flags", "Flags", base.HEX),
    retx = ProtoField.bool("netstack_tcsack.flags.retx", "RETX", 8, nil, 0x01),
    last = ProtoField.bool("netstack_tcsack.flags.last", "LAST", 8, nil, 0x02),
    probe = ProtoField.bool("netstack_tcsack.flags.probe", "PROBE", 8, nil, 0x04),
    trigger_count = ProtoField.bool("netstack_tcsack.flags.trigger_count", "TRIGGER_COUNT", 8, nil, 0x01),
    fin_seen = ProtoField.bool("netstack_tcsack.flags.fin_seen", "FIN_SEEN", 8, nil, 0x02),
    nak = ProtoField.bool("netstack_tcsack.flags.nak", "NAK (go-back-N baseline)", 8, nil, 0x04),
    flow_id = ProtoField.uint16("netstack_tcsack.flow_id", "Flow id", base.DEC),
    seq = ProtoField.uint32("netstack_tcsack.seq", "Sequence number", base.DEC),
    tsval = ProtoField.uint32("netstack_tcsack.tsval", "Timestamp (us)", base.DEC),
    payload = ProtoField.bytes("netstack_tcsack.payload", "Payload"),
    ack_seq = ProtoField.uint32("netstack_tcsack.ack_seq", "ACK sequence number", base.DEC),
    cum_ack = ProtoField.uint32("netstack_tcsack.cum_ack", "Cumulative ACK", base.DEC),
    tsecr = ProtoField.uint32("netstack_tcsack.tsecr", "Timestamp echo (us)", base.DEC),
    n_blocks = ProtoField.uint8("netstack_tcsack.n_blocks", "SACK blocks", base.DEC),
    reserved = ProtoField.uint8("netstack_tcsack.reserved", "Reserved", base.HEX),
    ack_delay = ProtoField.uint16("netstack_tcsack.ack_delay", "ACK delay (us)", base.DEC),
    block = ProtoField.none("netstack_tcsack.block", "SACK block"),
    block_start = ProtoField.uint32("netstack_tcsack.block_start", "Start", base.DEC),
    block_end = ProtoField.uint32("netstack_tcsack.block_end", "End (exclusive)", base.DEC),
    hole_start = ProtoField.uint32("netstack_tcsack.hole_start", "Missing from", base.DEC),
    hole_end = ProtoField.uint32("netstack_tcsack.hole_end", "Missing up to (exclusive)", base.DEC),
    ignored = ProtoField.bytes("netstack_tcsack.ignored", "Bytes after the last block"),
}
p_tcs.fields = { ft_.kind, ft_.flags, ft_.retx, ft_.last, ft_.probe, ft_.trigger_count, ft_.fin_seen, ft_.nak,
    ft_.flow_id, ft_.seq, ft_.tsval, ft_.payload, ft_.ack_seq, ft_.cum_ack, ft_.tsecr, ft_.n_blocks, ft_.reserved,
    ft_.ack_delay, ft_.block, ft_.block_start, ft_.block_end, ft_.hole_start, ft_.hole_end, ft_.ignored }
local et = {
    truncated = ef("netstack_tcsack.truncated", "T/C-SACK message truncated"),
    kind = ef("netstack_tcsack.unknown_kind", "Unknown T/C-SACK kind (1 data, 2 ACK)"),
    blocks = ef("netstack_tcsack.bad_block", "SACK blocks break the rules (ascending, non-adjacent, above cum_ack)"),
    too_many = ef("netstack_tcsack.too_many_blocks", "More SACK blocks than fit a 1500-byte MTU (181)"),
    reserved = ef("netstack_tcsack.reserved_set", "Reserved flag bits set", expert.group.PROTOCOL,
        expert.severity.NOTE),
    internal = ef("netstack_tcsack.internal", "netstack dissector failure", expert.group.UNDECODED),
}
p_tcs.experts = { et.truncated, et.kind, et.blocks, et.too_many, et.reserved, et.internal }

local TCS_MAX_BLOCKS = 181
local HALF32 = 2147483648

local function tcs_data(tvb, pinfo, t, n)
    if n < 12 then
        t:add_proto_expert_info(et.truncated, string.format("T/C-SACK data truncated: need 12 bytes, have %d", n))
        return "DATA [truncated]"
    end
    local fi = t:add(ft_.flags, tvb(1, 1))
    fi:add(ft_.retx, tvb(1, 1))
    fi:add(ft_.last, tvb(1, 1))
    fi:add(ft_.probe, tvb(1, 1))
    if band(tvb(1, 1):uint(), 0xF8) ~= 0 then fi:add_proto_expert_info(et.reserved) end
    t:add(ft_.flow_id, tvb(2, 2))
    t:add(ft_.seq, tvb(4, 4))
    t:add(ft_.tsval, tvb(8, 4))
    if n > 12 then t:add(ft_.payload, tvb(12, n - 12)) end
    local flags = tvb(1, 1):uint()
    local names = {}
    if band(flags, 1) ~= 0 then names[#names + 1] = "RETX" end
    if band(flags, 2) ~= 0 then names[#names + 1] = "LAST" end
    if band(flags, 4) ~= 0 then names[#names + 1] = "PROBE" end
    local s = string.format("DATA flow=%d seq=%d len=%d", tvb(2, 2):uint(), tvb(4, 4):uint(), n - 12)
    if #names > 0 then s = s .. " [" .. table.concat(names, ",") .. "]" end
    return s
end

local function tcs_blocks(tvb, t, cum, nb)
    local prev, nxt, holes = 0, cum, {}
    for i = 0, nb - 1 do
        local o = 20 + 8 * i
        local st, en = tvb(o, 4):uint(), tvb(o + 4, 4):uint()
        local bt = t:add(ft_.block, tvb(o, 8))
        bt:set_text(string.format("SACK block %d: [%d, %d)", i, st, en))
        bt:add(ft_.block_start, tvb(o, 4))
        bt:add(ft_.block_end, tvb(o + 4, 4))
        local rs, re = (st - cum) % 4294967296, (en - cum) % 4294967296
        if rs == 0 or rs >= HALF32 or rs <= prev or re <= rs or re >= HALF32 then
            bt:add_proto_expert_info(et.blocks)
        end
        prev = re
        holes[#holes + 1] = { nxt, st, o }
        nxt = en
    end
    for _, h in ipairs(holes) do
        t:add(ft_.hole_start, tvb(h[3], 4), h[1]):set_generated()
        t:add(ft_.hole_end, tvb(h[3], 4), h[2]):set_generated()
    end
end

local function tcs_ack(tvb, pinfo, t, n)
    if n < 20 then
        t:add_proto_expert_info(et.truncated, string.format("T/C-SACK ACK truncated: need 20 bytes, have %d", n))
        return "ACK [truncated]"
    end
    local fi = t:add(ft_.flags, tvb(1, 1))
    fi:add(ft_.trigger_count, tvb(1, 1))
    fi:add(ft_.fin_seen, tvb(1, 1))
    fi:add(ft_.nak, tvb(1, 1))
    if band(tvb(1, 1):uint(), 0xF8) ~= 0 then fi:add_proto_expert_info(et.reserved) end
    t:add(ft_.flow_id, tvb(2, 2))
    t:add(ft_.ack_seq, tvb(4, 4))
    t:add(ft_.cum_ack, tvb(8, 4))
    t:add(ft_.tsecr, tvb(12, 4))
    local ni = t:add(ft_.n_blocks, tvb(16, 1))
    t:add(ft_.reserved, tvb(17, 1))
    t:add(ft_.ack_delay, tvb(18, 2))
    local nb, cum = tvb(16, 1):uint(), tvb(8, 4):uint()
    local s = string.format("ACK flow=%d ack_seq=%d cum_ack=%d blocks=%d", tvb(2, 2):uint(), tvb(4, 4):uint(), cum,
        nb)
    if nb > TCS_MAX_BLOCKS then ni:add_proto_expert_info(et.too_many) end
    if n < 20 + 8 * nb then
        t:add_proto_expert_info(et.truncated, string.format("T/C-SACK ACK truncated: %d blocks need %d bytes, have %d",
            nb, 20 + 8 * nb, n))
        nb = math.floor((n - 20) / 8)
        s = s .. " [truncated]"
    end
    tcs_blocks(tvb, t, cum, nb)
    if n > 20 + 8 * nb then t:add(ft_.ignored, tvb(20 + 8 * nb, n - 20 - 8 * nb)) end
    local flags = tvb(1, 1):uint()
    local names = {}
    if band(flags, 1) ~= 0 then names[#names + 1] = "TRIGGER_COUNT" end
    if band(flags, 2) ~= 0 then names[#names + 1] = "FIN_SEEN" end
    if band(flags, 4) ~= 0 then names[#names + 1] = "NAK" end
    if #names > 0 then s = s .. " [" .. table.concat(names, ",") .. "]" end
    return s
end

local function tcs_dissect(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "T/C-SACK"
    local t = tree:add(p_tcs, tvb())
    if n < 1 then
        t:add_proto_expert_info(et.truncated, "T/C-SACK message truncated: no kind byte")
        pinfo.cols.info = "T/C-SACK [truncated]"
        return n
    end
    local kind = tvb(0, 1):uint()
    local ki = t:add(ft_.kind, tvb(0, 1))
    local s
    if kind == 1 then
        s = tcs_data(tvb, pinfo, t, n)
    elseif kind == 2 then
        s = tcs_ack(tvb, pinfo, t, n)
    else
        ki:add_proto_expert_info(et.kind, string.format("Unknown T/C-SACK kind %d", kind))
        if n > 1 then t:add(ft_.payload, tvb(1, n - 1)) end
        s = string.format("kind %d [unknown]", kind)
    end
    t:append_text(": " .. s)
    pinfo.cols.info = "T/C-SACK " .. s
    return n
end
p_tcs.dissector = guarded(tcs_dissect, p_tcs, et.internal)
udp_table:add(UDP_TCSACK, p_tcs)

------------------------------------------------------------------------------------------
-- TCD: marks in the IP ECN field, data packets, CNPs and TIMELY's ACKs (UDP 40300), headers/tcd.py
------------------------------------------------------------------------------------------

local p_tcd = Proto("netstack_tcd", "netstack TCD")
local TCD_STATES = { [0] = "non-congestion", [1] = "undetermined", [2] = "congestion" }
local CNP_KINDS = { [0] = "CNP-CE (congestion)", [1] = "CNP-UE (undetermined only)" }
local fc = {
    ecn = ProtoField.uint8("netstack_tcd.ecn", "IP ECN bits", base.HEX),
    mark = ProtoField.string("netstack_tcd.mark", "TCD mark"),
    state = ProtoField.uint8("netstack_tcd.state", "Most severe port state on the path", base.DEC, TCD_STATES),
    version = ProtoField.uint8("netstack_tcd.version", "Version", base.DEC),
    flags = ProtoField.uint8("netstack_tcd.flags", "Flags", base.HEX),
    fin = ProtoField.bool("netstack_tcd.fin", "FIN (last packet of the flow)", 8, nil, 0x01),
    ack_req = ProtoField.bool("netstack_tcd.ack_req", "ACK (answer with an ACK: the end of a TIMELY segment)", 8,
        nil, 0x02),
    flow = ProtoField.uint16("netstack_tcd.flow", "Flow", base.DEC),
    seq = ProtoField.uint32("netstack_tcd.seq", "Sequence number", base.DEC),
    send_ts_ns = ProtoField.uint64("netstack_tcd.send_ts_ns", "Send time (ns)", base.DEC),
    padding = ProtoField.bytes("netstack_tcd.padding", "Padding"),
    bth_opcode = ProtoField.uint8("netstack_tcd.bth_opcode", "BTH opcode", base.HEX, { [0x81] = "CNP" }),
    pkey = ProtoField.uint16("netstack_tcd.pkey", "P_Key", base.HEX),
    fecn = ProtoField.bool("netstack_tcd.fecn", "FECN", 8, nil, 0x80),
    becn = ProtoField.bool("netstack_tcd.becn", "BECN", 8, nil, 0x40),
    dest_qp = ProtoField.uint24("netstack_tcd.dest_qp", "Destination QP", base.DEC),
    psn = ProtoField.uint24("netstack_tcd.psn", "PSN", base.DEC),
    kind = ProtoField.uint8("netstack_tcd.kind", "CNP kind", base.DEC, CNP_KINDS),
    marked = ProtoField.uint16("netstack_tcd.marked", "Marked packets in the interval", base.DEC),
    reserved = ProtoField.bytes("netstack_tcd.reserved", "Reserved"),
    icrc = ProtoField.uint32("netstack_tcd.icrc", "ICRC (sent as zero)", base.HEX),
    ack_type = ProtoField.uint8("netstack_tcd.ack_type", "Type", base.HEX, { [0xAC] = "ACK" }),
    echo_ts_ns = ProtoField.uint64("netstack_tcd.echo_ts_ns", "Echoed send time (ns)", base.DEC),
    ce = ProtoField.uint16("netstack_tcd.ce", "CE marks in the segment", base.DEC),
    ue = ProtoField.uint16("netstack_tcd.ue", "UE marks in the segment", base.DEC),
}
p_tcd.fields = { fc.ecn, fc.mark, fc.state, fc.version, fc.flags, fc.fin, fc.ack_req, fc.flow, fc.seq,
    fc.send_ts_ns, fc.padding, fc.bth_opcode, fc.pkey, fc.fecn, fc.becn, fc.dest_qp, fc.psn, fc.kind, fc.marked,
    fc.reserved, fc.icrc, fc.ack_type, fc.echo_ts_ns, fc.ce, fc.ue }
local ec = {
    truncated = ef("netstack_tcd.truncated", "TCD message truncated"),
    version = ef("netstack_tcd.bad_version", "TCD data version is not 1"),
    flags = ef("netstack_tcd.reserved_flags", "Reserved flag bits set (only FIN, 0x01, and ACK, 0x02, are defined)"),
    cnp_len = ef("netstack_tcd.cnp_length", "A CNP is exactly 32 bytes"),
    cnp_qp = ef("netstack_tcd.cnp_dest_qp", "DestQP beyond a 16-bit flow"),
    cnp_kind = ef("netstack_tcd.cnp_kind", "CNP kind is neither CE (0) nor UE (1)"),
    ack_len = ef("netstack_tcd.ack_length", "An ACK is exactly 20 bytes"),
    unknown = ef("netstack_tcd.unknown", "Neither a TCD data packet (version 1), a CNP (opcode 0x81) nor an ACK (0xAC)"),
    internal = ef("netstack_tcd.internal", "netstack dissector failure", expert.group.UNDECODED),
}
p_tcd.experts = { ec.truncated, ec.version, ec.flags, ec.cnp_len, ec.cnp_qp, ec.cnp_kind, ec.ack_len, ec.unknown,
    ec.internal }

-- the codepoint assignments TcdCodepoints accepts: every permutation of 01, 10, 11 (ect, ue, ce)
local TCD_CODEPOINTS = {
    { 1, "ect10-ue01-ce11", 0, { 2, 1, 3 }, "ECT=10 UE=01 CE=11 (default)" },
    { 2, "ect10-ue11-ce01", 1, { 2, 3, 1 }, "ECT=10 UE=11 CE=01" },
    { 3, "ect01-ue10-ce11", 2, { 1, 2, 3 }, "ECT=01 UE=10 CE=11" },
    { 4, "ect01-ue11-ce10", 3, { 1, 3, 2 }, "ECT=01 UE=11 CE=10" },
    { 5, "ect11-ue10-ce01", 4, { 3, 2, 1 }, "ECT=11 UE=10 CE=01" },
    { 6, "ect11-ue01-ce10", 5, { 3, 1, 2 }, "ECT=11 UE=01 CE=10" },
}
local enum_rows = {}
for i, row in ipairs(TCD_CODEPOINTS) do enum_rows[i] = { row[1], row[2], row[3] } end
p_tcd.prefs.codepoints = Pref.enum("ECN codepoints (TcdCodepoints)", 0,
    "Which ECN value means ECT (no mark), UE (undetermined) and CE (congestion)", enum_rows, false)
p_tcd.prefs.all_ipv4 = Pref.bool("Show the TCD mark on every IPv4 packet", false,
    "Interpret the ECN bits of every IPv4 packet as a TCD mark (a postdissector), not only on UDP 40300")

local f_ip_dsfield = Field.new("ip.dsfield")

-- add the TCD reading of the ECN bits of the (innermost so far) IPv4 header; returns the mark name
local function add_mark(tree)
    local ds = last({ f_ip_dsfield() })
    if not ds then return nil end
    local ecn = band(ds.value, 3)
    local cps = TCD_CODEPOINTS[p_tcd.prefs.codepoints + 1][4]
    local mark, state
    if ecn == 0 then
        mark = "Not-ECT (not TCD capable, never marked)"
    elseif ecn == cps[1] then
        mark, state = "ECT (every port so far non-congestion)", 0
    elseif ecn == cps[2] then
        mark, state = "UE (crossed an undetermined port)", 1
    else
        mark, state = "CE (crossed a congestion port)", 2
    end
    tree:add(fc.ecn, ds.range, ecn):set_generated()
    tree:add(fc.mark, ds.range, mark):set_generated()
    if state then tree:add(fc.state, ds.range, state):set_generated() end
    return mark:match("^[%w%-]+")
end

local function tcd_data(tvb, pinfo, t, n)
    if n < 16 then
        t:add_proto_expert_info(ec.truncated, string.format("TCD data truncated: need 16 bytes, have %d", n))
        return "data [truncated]"
    end
    local vi = t:add(fc.version, tvb(0, 1))
    local fi = t:add(fc.flags, tvb(1, 1))
    fi:add(fc.fin, tvb(1, 1))
    fi:add(fc.ack_req, tvb(1, 1))
    if band(tvb(1, 1):uint(), 0xFC) ~= 0 then fi:add_proto_expert_info(ec.flags) end
    t:add(fc.flow, tvb(2, 2))
    t:add(fc.seq, tvb(4, 4))
    t:add(fc.send_ts_ns, tvb(8, 8))
    if n > 16 then t:add(fc.padding, tvb(16, n - 16)) end
    if tvb(0, 1):uint() ~= 1 then vi:add_proto_expert_info(ec.version) end
    local s = string.format("data flow=%d seq=%d", tvb(2, 2):uint(), tvb(4, 4):uint())
    if band(tvb(1, 1):uint(), 1) ~= 0 then s = s .. " [FIN]" end
    if band(tvb(1, 1):uint(), 2) ~= 0 then s = s .. " [ACK]" end
    return s
end

local function tcd_cnp(tvb, pinfo, t, n)
    if n < 32 then
        t:add_proto_expert_info(ec.truncated, string.format("TCD CNP truncated: need 32 bytes, have %d", n))
        return "CNP [truncated]"
    end
    t:add(fc.bth_opcode, tvb(0, 1))
    t:add(fc.pkey, tvb(2, 2))
    t:add(fc.fecn, tvb(4, 1))
    t:add(fc.becn, tvb(4, 1))
    local qi = t:add(fc.dest_qp, tvb(5, 3))
    t:add(fc.flow, tvb(6, 2))
    t:add(fc.psn, tvb(9, 3))
    local ki = t:add(fc.kind, tvb(12, 1))
    t:add(fc.marked, tvb(13, 2))
    t:add(fc.reserved, tvb(15, 13))
    t:add(fc.icrc, tvb(28, 4))
    if tvb(5, 1):uint() ~= 0 then qi:add_proto_expert_info(ec.cnp_qp) end
    if tvb(12, 1):uint() > 1 then ki:add_proto_expert_info(ec.cnp_kind) end
    if n ~= 32 then t:add_proto_expert_info(ec.cnp_len, string.format("A CNP is 32 bytes, got %d", n)) end
    local kind = tvb(12, 1):uint() == 1 and "CNP-UE" or (tvb(12, 1):uint() == 0 and "CNP-CE" or "CNP-?")
    return string.format("%s flow=%d marked=%d", kind, tvb(6, 2):uint(), tvb(13, 2):uint())
end

local function tcd_ack(tvb, pinfo, t, n)
    if n < 20 then
        t:add_proto_expert_info(ec.truncated, string.format("TCD ACK truncated: need 20 bytes, have %d", n))
        return "ACK [truncated]"
    end
    t:add(fc.ack_type, tvb(0, 1))
    local fi = t:add(fc.flags, tvb(1, 1))
    if tvb(1, 1):uint() ~= 0 then fi:add_proto_expert_info(ec.flags) end
    t:add(fc.flow, tvb(2, 2))
    t:add(fc.seq, tvb(4, 4))
    t:add(fc.echo_ts_ns, tvb(8, 8))
    t:add(fc.ce, tvb(16, 2))
    t:add(fc.ue, tvb(18, 2))
    if n ~= 20 then t:add_proto_expert_info(ec.ack_len, string.format("An ACK is 20 bytes, got %d", n)) end
    return string.format("ACK flow=%d seq=%d ce=%d ue=%d", tvb(2, 2):uint(), tvb(4, 4):uint(), tvb(16, 2):uint(),
        tvb(18, 2):uint())
end

local function tcd_dissect(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "TCD"
    local t = tree:add(p_tcd, tvb())
    local s
    if n < 1 then
        t:add_proto_expert_info(ec.truncated, "TCD message truncated: empty datagram")
        s = "[truncated]"
    elseif tvb(0, 1):uint() == 0x81 then
        s = tcd_cnp(tvb, pinfo, t, n)
    elseif tvb(0, 1):uint() == 1 then
        s = tcd_data(tvb, pinfo, t, n)
    elseif tvb(0, 1):uint() == 0xAC then
        s = tcd_ack(tvb, pinfo, t, n)
    else
        t:add_proto_expert_info(ec.unknown)
        s = string.format("first byte 0x%02x [unknown]", tvb(0, 1):uint())
    end
    local mark = add_mark(t)
    if mark then s = s .. " mark=" .. mark end
    t:append_text(": " .. s)
    pinfo.cols.info = "TCD " .. s
    return n
end
p_tcd.dissector = guarded(tcd_dissect, p_tcd, ec.internal)
udp_table:add(UDP_TCD, p_tcd)

-- the TCD mark on every IPv4 packet (preference netstack_tcd.all_ipv4, default off)
local p_tcdmark = Proto("netstack_tcdmark", "netstack TCD mark")
local f_ip_proto = Field.new("ip.proto")
local f_udp_port = Field.new("udp.port")
p_tcdmark.dissector = function(tvb, pinfo, tree)
    if not p_tcd.prefs.all_ipv4 or not f_ip_proto() then return end
    for _, port in ipairs({ f_udp_port() }) do
        if port.value == UDP_TCD then return end -- already shown by netstack_tcd
    end
    local ok, err = pcall(function()
        local t = tree:add(p_tcdmark, tvb(0, 0))
        local mark = add_mark(t)
        if mark then t:append_text(": " .. mark) end
    end)
    if not ok then tree:add(p_tcdmark, tvb(0, 0)):append_text(" [netstack dissector failure: " .. err .. "]") end
end
register_postdissector(p_tcdmark)
