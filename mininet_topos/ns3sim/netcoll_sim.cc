// netcoll's simulated network, transport and switch barrier on ns-3, compiled at run time by
// cppyy.
//
// Python builds the dragonfly through this class (so 5,000-node networks do not pay a
// Python-to-C++ call per object), sends messages through it, and drains completed messages in
// batches: no Python callback runs per packet. The payload bytes themselves stay in Python
// (ns-3 moves sizes, the algorithms' data is handed over when a message completes), so results
// are exact by construction of delivery, and a message completes only when every one of its
// segments crossed the simulated network.
//
// Forwarding is done here, at layer 2, the way the P4 program's tables do it: ns-3's
// point-to-point devices, channels and drop-tail queues carry the packets, but no IP stack is
// installed. A router looks a unicast destination up in three exact-match tables (the host,
// its router's /24, its group's /16: dragonfly minimal routing, as controller/routing.py
// computes it) and a multicast group in its tree table, whose entry names the parent device
// (the P4 program's parent-port check) and the child devices. ns-3's IPv4 forwarding walked
// every route and interface of a router per packet, which at Df(6,12,6) (106 routes, 23
// interfaces) made a 1 KiB message 4-7 times dearer than at Df(2,4,2).
//
// Sends complete as the agents' engine completes them (host_agents/transport/unicast.py,
// multicast_root.py). A unicast's receiver ACKs cumulatively: every `ackEvery` segments, after
// `ackDelay` otherwise, and at once for the last segment; the ACK is a frame of its own (our
// header and the engine's 8-byte selective-ACK bitmap) routed back to the sender, whose window
// it credits and whose send completes when the ACK of the last segment is in. A multicast's
// receivers ACK to their ACK target alike (the delayed ACK only for a message longer than the
// root's window) (host_agents/plans.py: the root for its own group, a co-root per other
// group, which merges its group's ACKs into one for the root after `ackDelay`, at once when
// complete); the root runs at most `mcastWindow` segments ahead of its
// slowest ACK source, and its send completes when its last segment went out (the engine's
// root returns then and gathers the ACKs in the background). Published multicasts (no ACK
// plan) are paced by the root's link only. Lossless: no retransmission, no NACK.
//
// Every frame carries a 44-byte header: destination and source addresses, padded to 28 bytes
// (the size of the IPv4 and UDP headers this replaces, so wire bytes stay what they were), and
// the message's id, size and kind (16 bytes).
//
// The in-network barrier runs in the routers like p4src/common/barrier.p4: each router counts
// ARRIVEs of an epoch from its children (member hosts and child routers of the barrier tree),
// sends one ARRIVE to its parent when all have arrived, and the root router sends RELEASE down
// the tree (hop by hop, which puts the same bytes on each tree link as the P4 multicast).
// An in-network reduction is the same exchange with a payload, like p4src/common/reduce.p4:
// each chunk's contribution (an ARRIVE carrying the chunk's bytes) is merged at every router
// into one partial of the same size sent up, and the root's result comes down as a RELEASE
// carrying it. The lanes' values stay in Python, like every payload here.

#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace netcoll_sim
{

using namespace ns3;

const uint32_t ROUTE_HEADER = 28; // destination (4), source (4), padding: IPv4 + UDP
const uint32_t HEADER = 16;       // message id (8), message bytes (4), kind (4)
const uint32_t FRAME_HEADER = ROUTE_HEADER + HEADER;
const uint32_t OVERHEAD = 2 + FRAME_HEADER; // PPP + ours
const uint16_t PPP_PROTOCOL = 0x0800;        // any protocol PPP can name; nothing reads it
const uint32_t KIND_DATA = 0;
const uint32_t KIND_ARRIVE = 1;
const uint32_t KIND_RELEASE = 2;
const uint32_t KIND_ACK = 3;  // a unicast receiver's cumulative ACK, to the sender
const uint32_t KIND_MACK = 4; // a multicast receiver's or co-root's cumulative ACK, up its plan
const uint32_t KIND_MASK = 0x7F;
const uint32_t ACK_BYTES = 8; // an ACK's body: the engine's selective-ACK bitmap
const uint64_t RELEASE_FLAG = uint64_t(1) << 47;
const uint64_t SENT_FLAG = uint64_t(1) << 45; // a sender's send completed (message id below)
const uint32_t WINDOWED = 0x80; // a unicast segment: ACKed to its sender, within its window
const uint32_t NO_DEVICE = 0xFFFFFFFF;

inline bool
IsMulticast(uint32_t address)
{
    return (address >> 28) == 0xE;
}

struct Frame
{
    uint32_t dst;
    uint32_t src;
    uint64_t msg;
    uint32_t bytes;
    uint32_t kind;
};

// Our headers as an ns-3 Header, put in front of a packet whose payload is ns-3's virtual zero
// area: the payload is then never written out, and a router's copy of a frame (copy on write)
// duplicates 46 bytes, not the segment.
class FrameHeader : public Header
{
  public:
    Frame frame{};

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("netcoll_sim::FrameHeader").SetParent<Header>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    uint32_t GetSerializedSize() const override
    {
        return FRAME_HEADER;
    }

    void Serialize(Buffer::Iterator start) const override
    {
        uint8_t header[FRAME_HEADER] = {};
        std::memcpy(header, &frame.dst, 4);
        std::memcpy(header + 4, &frame.src, 4);
        std::memcpy(header + ROUTE_HEADER, &frame.msg, 8);
        std::memcpy(header + ROUTE_HEADER + 8, &frame.bytes, 4);
        std::memcpy(header + ROUTE_HEADER + 12, &frame.kind, 4);
        start.Write(header, FRAME_HEADER);
    }

    uint32_t Deserialize(Buffer::Iterator start) override
    {
        uint8_t header[FRAME_HEADER];
        start.Read(header, FRAME_HEADER);
        std::memcpy(&frame.dst, header, 4);
        std::memcpy(&frame.src, header + 4, 4);
        std::memcpy(&frame.msg, header + ROUTE_HEADER, 8);
        std::memcpy(&frame.bytes, header + ROUTE_HEADER + 8, 4);
        std::memcpy(&frame.kind, header + ROUTE_HEADER + 12, 4);
        return FRAME_HEADER;
    }

    void Print(std::ostream& os) const override
    {
        os << "netcoll dst=" << frame.dst << " src=" << frame.src << " msg=" << frame.msg << " kind=" << frame.kind;
    }
};

struct DeviceCounter
{
    uint64_t packets = 0;
    uint64_t payload = 0; // bytes of message data, our header and below excluded
    uint64_t wire = 0;    // bytes the device put on the link (PPP frame)
    uint64_t drops = 0;   // packets its queue refused

    void Tx(Ptr<const Packet> p)
    {
        packets++;
        wire += p->GetSize();
        payload += p->GetSize() - OVERHEAD;
    }

    void Drop(Ptr<const Packet>)
    {
        drops++;
    }
};

// A router's forwarding state: what the P4 program's tables hold.
struct RouterTables
{
    std::unordered_map<uint32_t, uint32_t> host;  // address -> device (hosts of this router)
    std::unordered_map<uint32_t, uint32_t> net24; // address >> 8 -> device (own group's routers)
    std::unordered_map<uint32_t, uint32_t> net16; // address >> 16 -> device (other groups)
    struct Tree
    {
        uint32_t parent;              // the only device the group's packets may come in by
        std::vector<uint32_t> children;
    };
    std::unordered_map<uint32_t, Tree> trees; // multicast group -> tree

    uint32_t Lookup(uint32_t dst) const
    {
        auto h = host.find(dst);
        if (h != host.end())
        {
            return h->second;
        }
        auto r = net24.find(dst >> 8);
        if (r != net24.end())
        {
            return r->second;
        }
        auto g = net16.find(dst >> 16);
        return g == net16.end() ? NO_DEVICE : g->second;
    }
};

struct BarrierRouter
{
    bool member = false;
    uint32_t expected = 0; // children: member hosts and child routers
    bool root = false;
    uint32_t parent = NO_DEVICE;         // device toward the parent router
    std::vector<uint32_t> children;      // devices toward hosts and child routers, in tree order
    std::map<uint64_t, uint32_t> counts; // barrier key (comm, epoch) -> arrivals
};

// A message waiting in a host's send queue; its segments are made one at a time, as the NIC
// and the send window allow, so a 5 MB message does not sit in memory as 3,600 packets.
struct Outgoing
{
    uint32_t dst;
    uint64_t msg;
    uint32_t bytes;
    uint32_t segments;
    uint32_t next;
    bool windowed; // unicast: counts against the window; multicast: paced by the NIC only
};

// A message arriving at a host: segments come in order (one path, FIFO queues), so the count
// is the cumulative ACK.
struct Receiving
{
    uint32_t got = 0;
    uint32_t unacked = 0;   // arrived since the last ACK
    uint32_t to = 0;        // host the ACKs go to (the sender, or a multicast's ACK target)
    uint32_t kind = 0;      // KIND_ACK or KIND_MACK; 0: nothing is acknowledged
    EventId timer;          // the delayed ACK
};

// Who ACKs one multicast tree's messages to whom (the engine's McastPlan, without switch
// merging): receiver -> target (the root, or its group's co-root, whose own target is itself).
struct AckPlan
{
    uint32_t root = 0;
    std::unordered_map<uint32_t, uint32_t> target;
    std::unordered_map<uint32_t, uint32_t> members; // co-root -> receivers it merges (itself too)
    uint32_t sources = 0; // ACK streams the root waits for: its own receivers' and co-roots'
};

// A co-root merging its group's ACKs of one multicast.
struct Merging
{
    std::unordered_map<uint32_t, uint32_t> cum; // member -> segments it has
    uint32_t reported = 0;
    EventId timer;
};

// An acknowledged multicast until its root has every ACK.
struct Multicast
{
    uint32_t group;
    uint32_t segments;
    std::unordered_map<uint32_t, uint32_t> atRoot; // ACK source -> segments it reported
    uint32_t slowest = 0;
    std::unordered_map<uint32_t, Merging> coroots;
};

class Sim;

struct HostPump
{
    Sim* sim;
    uint32_t host;
    void TxEnd(Ptr<const Packet>);
};

class Sim
{
  public:
    uint32_t segment = 1460;
    uint64_t delivered = 0;

    // `segmentBytes`: message bytes per frame (the links' MTU less netcoll's header, as the
    // agents cut messages: 1460 at 1500-byte frames, 8960 at 9000-byte jumbo frames)
    void Configure(std::string rate,
                   std::string delay,
                   uint32_t switchQueue,
                   uint32_t hostQueue,
                   uint32_t window,
                   uint32_t segmentBytes)
    {
        if (segmentBytes == 0 || segmentBytes + FRAME_HEADER > 0xFFFF)
        {
            throw std::invalid_argument("a segment takes 1 to 65491 bytes");
        }
        m_window = window;
        m_ackEvery = 16;
        m_ackDelay = 0.002;
        m_mcastWindow = 32;
        segment = segmentBytes;
        m_router.SetDeviceAttribute("DataRate", StringValue(rate));
        // room for a full segment plus our headers
        m_router.SetDeviceAttribute("Mtu", UintegerValue(segment + FRAME_HEADER));
        m_router.SetChannelAttribute("Delay", StringValue(delay));
        m_router.SetQueue("ns3::DropTailQueue<Packet>",
                          "MaxSize",
                          QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, switchQueue)));
        // flow control talks to a traffic-control layer (an event per dequeued packet); there is
        // none: the device queue is the switch's drop-tail port queue
        m_router.DisableFlowControl();
        m_hostQueue = hostQueue;
    }

    // The receivers' ACK cadence and the multicast root's window, as the engine's
    // ack_every, ack_delay (seconds) and mcast_window.
    void SetAcks(uint32_t ackEvery, double ackDelay, uint32_t mcastWindow)
    {
        if (ackEvery == 0 || mcastWindow == 0 || ackDelay < 0)
        {
            throw std::invalid_argument("ACK every 1 or more segments, a window of 1 or more");
        }
        m_ackEvery = ackEvery;
        m_ackDelay = ackDelay;
        m_mcastWindow = mcastWindow;
    }

    void SetGlobalRate(std::string rate, std::string delay)
    {
        m_globalRate = rate;
        m_globalDelay = delay;
    }

    // Nodes 0..hosts-1 are hosts, then the routers.
    void CreateNodes(uint32_t hosts, uint32_t routers)
    {
        m_hosts = hosts;
        m_nodes.Create(hosts + routers);
        m_nodeDevices.resize(hosts + routers);
        m_rx.resize(hosts);
        m_out.resize(hosts);
        m_inFlight.assign(hosts, 0);
        m_hostDevice.assign(hosts, NO_DEVICE);
        m_tables.resize(routers);
        m_barrier.resize(routers);
    }

    // A point-to-point link between nodes a and b with addresses addrA and addrB at its ends;
    // returns the link index. Device 2*link is a's end, 2*link+1 is b's. kind: 0 host link
    // (a is the host), 1 local, 2 global.
    uint32_t AddLink(uint32_t a, uint32_t b, int kind, uint32_t addrA, uint32_t addrB)
    {
        PointToPointHelper helper = m_router;
        if (kind == 2 && !m_globalRate.empty())
        {
            helper.SetDeviceAttribute("DataRate", StringValue(m_globalRate));
            helper.SetChannelAttribute("Delay", StringValue(m_globalDelay));
        }
        NetDeviceContainer devices = helper.Install(m_nodes.Get(a), m_nodes.Get(b));
        uint32_t link = m_devices.size() / 2;
        uint32_t nodes[2] = {a, b};
        uint32_t addrs[2] = {addrA, addrB};
        for (uint32_t end = 0; end < 2; end++)
        {
            Ptr<PointToPointNetDevice> dev = DynamicCast<PointToPointNetDevice>(devices.Get(end));
            uint32_t index = m_devices.size();
            m_devices.push_back(dev);
            m_deviceAddress.push_back(addrs[end]);
            std::vector<uint32_t>& own = m_nodeDevices[nodes[end]];
            if (own.size() <= dev->GetIfIndex())
            {
                own.resize(dev->GetIfIndex() + 1, NO_DEVICE);
            }
            own[dev->GetIfIndex()] = index;
            // replaces the node's own handler: frames come to us, not to a protocol stack
            dev->SetReceiveCallback(MakeCallback(&Sim::Receive, this));
            // a deque: counters never move, so the trace sinks may point at them
            DeviceCounter& counter = m_counters.emplace_back();
            m_acks.push_back(0);
            dev->TraceConnectWithoutContext("PhyTxBegin", MakeCallback(&DeviceCounter::Tx, &counter));
            dev->TraceConnectWithoutContext("MacTxDrop", MakeCallback(&DeviceCounter::Drop, &counter));
        }
        if (kind == 0)
        {
            // hosts queue whole messages themselves (Pump): their NIC holds a packet or two
            m_devices[2 * link]->GetQueue()->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, m_hostQueue));
            m_hostDevice[a] = 2 * link;
            HostPump& pump = m_pumps.emplace_back(HostPump{this, a});
            devices.Get(0)->TraceConnectWithoutContext("PhyTxEnd",
                                                       MakeCallback(&HostPump::TxEnd, &pump));
        }
        return link;
    }

    // -- forwarding tables of router r (index among routers) --------------------------------

    // Packets for `dst` (a host's address) leave by `device`.
    void AddHostRoute(uint32_t r, uint32_t dst, uint32_t device)
    {
        m_tables[r].host[dst] = device;
    }

    // Packets for addresses in net/mask leave by `device`; mask is /24 (a router of the own
    // group) or /16 (a group), the two prefixes dragonfly minimal routing needs.
    void AddNetworkRoute(uint32_t r, uint32_t net, uint32_t mask, uint32_t device)
    {
        if (mask == 0xFFFFFF00)
        {
            m_tables[r].net24[net >> 8] = device;
        }
        else if (mask == 0xFFFF0000)
        {
            m_tables[r].net16[net >> 16] = device;
        }
        else
        {
            throw std::invalid_argument("only /24 and /16 network routes are supported");
        }
    }

    // At router r, packets of multicast `group` coming in by `parent` leave by `children`.
    void AddMulticastRoute(uint32_t r,
                           uint32_t group,
                           uint32_t parent,
                           const std::vector<uint32_t>& children)
    {
        m_tables[r].trees[group] = RouterTables::Tree{parent, children};
    }

    // Multicast `group` (rooted at host `root`) is acknowledged: receivers[i] ACKs to
    // targets[i] (host indices).
    void SetAckPlan(uint32_t group,
                    uint32_t root,
                    const std::vector<uint32_t>& receivers,
                    const std::vector<uint32_t>& targets)
    {
        AckPlan plan;
        plan.root = root;
        for (size_t i = 0; i < receivers.size(); i++)
        {
            plan.target[receivers[i]] = targets[i];
            if (targets[i] == root)
            {
                plan.sources++;
            }
            else
            {
                plan.members[targets[i]]++;
            }
        }
        plan.sources += plan.members.size();
        m_plans[group] = plan;
    }

    // -- barrier state of router r ----------------------------------------------------------

    void BarrierRouterSet(uint32_t r, uint32_t expected, bool root, uint32_t parentDevice)
    {
        BarrierRouter& b = m_barrier[r];
        b.member = true;
        b.expected = expected;
        b.root = root;
        b.parent = root ? NO_DEVICE : parentDevice;
        b.children.clear();
        b.counts.clear();
    }

    void BarrierRouterChild(uint32_t r, uint32_t childDevice)
    {
        m_barrier[r].children.push_back(childDevice);
    }

    // -- traffic ------------------------------------------------------------------------------

    // A message of `bytes` from host `src` to address `dst` (a host or a multicast group),
    // cut into segments; each receiver reports it complete once all its segments arrived, the
    // sender as SENT_FLAG | msg (a unicast: once its last segment is acknowledged; a
    // multicast: once its last segment went out). A host sends its messages in order, one
    // segment whenever its NIC is free, and keeps at most `window` unicast segments
    // unacknowledged (the engine's message window); an `acked` multicast to a group with an
    // ACK plan runs at most the multicast window ahead of its slowest ACK source.
    void Send(uint32_t src, uint32_t dst, uint64_t msg, uint32_t bytes, bool acked)
    {
        uint32_t segments = bytes == 0 ? 1 : (bytes + segment - 1) / segment;
        bool multicast = IsMulticast(dst);
        if (!multicast)
        {
            m_sending[msg] = Sending{segments, 0};
        }
        else if (acked && m_plans.count(dst))
        {
            m_mcast.emplace(msg, Multicast{dst, segments, {}, 0, {}});
        }
        m_out[src].push_back(Outgoing{dst, msg, bytes, segments, 0, !multicast});
        Pump(src);
    }

    // Send what the NIC and the window allow from host h's queue.
    void Pump(uint32_t h)
    {
        std::deque<Outgoing>& queue = m_out[h];
        Ptr<Queue<ns3::Packet>> nic = m_devices[m_hostDevice[h]]->GetQueue();
        while (!queue.empty())
        {
            Outgoing& o = queue.front();
            if (o.windowed && m_inFlight[h] >= m_window)
            {
                return; // an ACK pumps again
            }
            if (!o.windowed && o.next >= m_mcastWindow)
            {
                auto m = m_mcast.find(o.msg);
                if (m != m_mcast.end() && o.next >= m->second.slowest + m_mcastWindow)
                {
                    return; // the slowest ACK source's next ACK pumps again
                }
            }
            if (nic->GetNPackets() > 0)
            {
                return; // the end of the current transmission pumps again
            }
            uint32_t len = o.next + 1 < o.segments ? segment : o.bytes - o.next * segment;
            if (o.bytes == 0)
            {
                len = 0;
            }
            uint32_t kind = KIND_DATA | (o.windowed ? WINDOWED : 0) | (h << 8);
            uint32_t d = m_hostDevice[h];
            SendFrame(d, Frame{o.dst, m_deviceAddress[d], o.msg, o.bytes, kind}, len);
            if (o.windowed)
            {
                m_inFlight[h]++;
            }
            if (++o.next == o.segments)
            {
                if (!o.windowed)
                {
                    Complete(h, o.msg | SENT_FLAG);
                }
                queue.pop_front();
            }
        }
    }

    // A host arrives at a barrier (key names communicator and epoch): one ARRIVE to its router.
    // Its RELEASE completes as message id RELEASE_FLAG | key.
    void Arrive(uint32_t host, uint64_t key)
    {
        SendToNeighbour(m_hostDevice[host], key, KIND_ARRIVE, 0);
    }

    // A host's contribution of `bytes` to one chunk of an in-network reduction (key names
    // communicator, epoch and chunk): the result completes as RELEASE_FLAG | key.
    void Contribute(uint32_t host, uint64_t key, uint32_t bytes)
    {
        SendToNeighbour(m_hostDevice[host], key, KIND_ARRIVE, bytes);
    }

    // Run until `until` seconds (negative: no limit) or until a message completed; returns the
    // number of completions waiting in TakeDone(). Idle() then says whether ns-3 ran out of
    // events (Simulator::IsFinished() cannot tell afterwards: it is true after any Stop()).
    uint32_t Advance(double until)
    {
        EventId limit;
        m_idleAtLimit = false;
        if (until >= 0)
        {
            Time at = Seconds(until);
            Time now = Simulator::Now();
            limit = Simulator::Schedule(at > now ? at - now : Time(0), &Sim::Limit, this);
        }
        m_stopping = false;
        m_idle = false;
        if (m_done.empty())
        {
            Simulator::Run();
            // Run returns on a completion's stop, at the limit, or with no events left
            m_idle = m_done.empty() && (until < 0 || m_idleAtLimit);
        }
        if (limit.IsPending())
        {
            Simulator::Cancel(limit);
        }
        return m_done.size();
    }

    bool Idle() const
    {
        return m_idle;
    }

    double Now() const
    {
        return Simulator::Now().GetSeconds();
    }

    // Completions as (host << 48 | message id) pairs; message ids stay below 2^48.
    std::vector<uint64_t> TakeDone()
    {
        std::vector<uint64_t> out;
        out.swap(m_done);
        return out;
    }

    uint64_t DevicePackets(uint32_t d) const
    {
        return m_counters[d].packets;
    }

    uint64_t DevicePayload(uint32_t d) const
    {
        return m_counters[d].payload;
    }

    uint64_t DeviceWire(uint32_t d) const
    {
        return m_counters[d].wire;
    }

    uint64_t DeviceDrops(uint32_t d) const
    {
        return m_counters[d].drops;
    }

    // Packets a router had no route or tree entry for, or that came to a tree by a device other
    // than its parent's; a host's count of frames not addressed to it. 0 unless state is wrong.
    uint64_t Unrouted() const
    {
        return m_unrouted;
    }

    uint32_t Devices() const
    {
        return m_counters.size();
    }

    // ACK frames device d took to send (of DevicePackets(d)).
    uint64_t DeviceAcks(uint32_t d) const
    {
        return m_acks[d];
    }

    void ResetCounters()
    {
        for (auto& c : m_counters)
        {
            c = DeviceCounter();
        }
        std::fill(m_acks.begin(), m_acks.end(), 0);
        m_unrouted = 0;
    }

    // Segments hosts still owe: queued, or sent and not yet credited back.
    uint64_t Outstanding() const
    {
        uint64_t total = 0;
        for (uint32_t h = 0; h < m_out.size(); h++)
        {
            total += m_inFlight[h];
            for (const Outgoing& o : m_out[h])
            {
                total += o.segments - o.next;
            }
        }
        return total;
    }

    // After a failed collective (the network is idle): forget queued messages, windows that
    // dropped packets never credited back, partly received messages and completions.
    void ForgetTraffic()
    {
        for (auto& queue : m_out)
        {
            queue.clear();
        }
        std::fill(m_inFlight.begin(), m_inFlight.end(), 0);
        for (auto& pending : m_rx)
        {
            for (auto& kv : pending)
            {
                kv.second.timer.Cancel();
            }
            pending.clear();
        }
        m_sending.clear();
        m_mcast.clear(); // co-roots' timers find nothing when they fire
        m_done.clear();
    }

    void Destroy()
    {
        Simulator::Destroy();
    }

  private:
    void StopNow()
    {
        Simulator::Stop();
    }

    void Limit()
    {
        // while an event runs, IsFinished() says whether any other event is left
        m_idleAtLimit = Simulator::IsFinished();
        Simulator::Stop();
    }

    // One frame out of device d: our headers, then `len` bytes of the message (zeros: the data
    // is Python's).
    void SendFrame(uint32_t d, const Frame& f, uint32_t len)
    {
        Ptr<Packet> p = Create<Packet>(len);
        FrameHeader header;
        header.frame = f;
        p->AddHeader(header);
        Transmit(d, p, IsAck(f.kind));
    }

    static bool IsAck(uint32_t kind)
    {
        uint32_t k = kind & KIND_MASK;
        return k == KIND_ACK || k == KIND_MACK;
    }

    // Out of device d (point to point: the far end takes every frame, whatever the address).
    void Transmit(uint32_t d, Ptr<Packet> p, bool ack)
    {
        if (m_devices[d]->Send(p, m_broadcast, PPP_PROTOCOL) && ack)
        {
            m_acks[d]++;
        }
    }

    // One hop: to the node at the other end of device d (a router's barrier state, or a host).
    void SendToNeighbour(uint32_t d, uint64_t key, uint32_t kind, uint32_t bytes)
    {
        Frame f{m_deviceAddress[d ^ 1], m_deviceAddress[d], key, bytes, kind};
        SendFrame(d, f, bytes);
    }

    bool Receive(Ptr<NetDevice> dev, Ptr<const Packet> p, uint16_t, const Address&)
    {
        uint32_t node = dev->GetNode()->GetId();
        uint32_t d = m_nodeDevices[node][dev->GetIfIndex()];
        FrameHeader header;
        p->PeekHeader(header);
        const Frame& f = header.frame;
        if (node >= m_hosts)
        {
            RouterReceive(node - m_hosts, d, f, p);
        }
        else if (f.dst == m_deviceAddress[d] || IsMulticast(f.dst))
        {
            HostReceive(node, f);
        }
        else
        {
            m_unrouted++;
        }
        return true;
    }

    void RouterReceive(uint32_t r, uint32_t in, const Frame& f, Ptr<const Packet> p)
    {
        const RouterTables& tables = m_tables[r];
        if (IsMulticast(f.dst))
        {
            auto t = tables.trees.find(f.dst);
            if (t == tables.trees.end() || t->second.parent != in)
            {
                m_unrouted++;
                return;
            }
            for (uint32_t out : t->second.children)
            {
                Transmit(out, p->Copy(), false);
            }
            return;
        }
        if (f.dst == m_deviceAddress[in])
        {
            RouterBarrier(r, f.msg, f.kind, f.bytes);
            return;
        }
        uint32_t out = tables.Lookup(f.dst);
        if (out == NO_DEVICE)
        {
            m_unrouted++;
            return;
        }
        Transmit(out, p->Copy(), IsAck(f.kind));
    }

    void HostReceive(uint32_t node, const Frame& f)
    {
        uint32_t kind = f.kind & KIND_MASK;
        if (f.kind == KIND_RELEASE)
        {
            Complete(node, f.msg | RELEASE_FLAG);
            return;
        }
        if (kind == KIND_ACK)
        {
            Acked(node, f.msg, f.bytes); // an ACK's cumulative count rides in `bytes`
            return;
        }
        if (kind == KIND_MACK)
        {
            Merge(node, f.msg, f.kind >> 8, f.bytes);
            return;
        }
        uint32_t segments = f.bytes == 0 ? 1 : (f.bytes + segment - 1) / segment;
        Receiving single;
        Receiving& r = segments == 1 ? single : m_rx[node][f.msg];
        r.got++;
        r.unacked++;
        bool complete = r.got == segments;
        bool delayed = true; // may wait ackDelay for ackEvery segments
        if (f.kind & WINDOWED)
        {
            r.to = f.kind >> 8; // the sender's host index rides above the kind
            r.kind = KIND_ACK;
        }
        else if (auto m = m_mcast.find(f.msg); m != m_mcast.end())
        {
            r.to = m_plans[m->second.group].target[node];
            r.kind = KIND_MACK;
            // the root sends a message no longer than its window at once: no progress is due
            delayed = m->second.segments > m_mcastWindow;
        }
        if (r.kind != 0 && (complete || r.unacked >= m_ackEvery))
        {
            Report(node, f.msg, r);
        }
        else if (r.kind != 0 && delayed && !r.timer.IsPending())
        {
            Time later = Seconds(m_ackDelay);
            r.timer = Simulator::Schedule(later, &Sim::AckLater, this, node, f.msg);
        }
        if (complete)
        {
            if (segments > 1)
            {
                m_rx[node].erase(f.msg);
            }
            Complete(node, f.msg);
        }
    }

    // A receiver's cumulative ACK of what it has, to r.to (a co-root's own goes to itself).
    void Report(uint32_t node, uint64_t msg, Receiving& r)
    {
        r.unacked = 0;
        r.timer.Cancel();
        if (r.kind == KIND_MACK && r.to == node)
        {
            Merge(node, msg, node, r.got);
            return;
        }
        SendAck(node, r.to, msg, r.got, r.kind);
    }

    void AckLater(uint32_t node, uint64_t msg)
    {
        auto it = m_rx[node].find(msg);
        if (it != m_rx[node].end() && it->second.unacked > 0)
        {
            Report(node, msg, it->second);
        }
    }

    void SendAck(uint32_t from, uint32_t to, uint64_t msg, uint32_t cum, uint32_t kind)
    {
        uint32_t d = m_hostDevice[from];
        uint32_t dst = m_deviceAddress[m_hostDevice[to]];
        SendFrame(d, Frame{dst, m_deviceAddress[d], msg, cum, kind | (from << 8)}, ACK_BYTES);
    }

    // A unicast sender hears that `cum` segments of `msg` arrived.
    void Acked(uint32_t sender, uint64_t msg, uint32_t cum)
    {
        auto it = m_sending.find(msg);
        if (it == m_sending.end() || cum <= it->second.acked)
        {
            return;
        }
        Credit(sender, cum - it->second.acked);
        it->second.acked = cum;
        if (cum >= it->second.segments)
        {
            m_sending.erase(it);
            Complete(sender, msg | SENT_FLAG);
        }
    }

    // Host `node` hears that `from` has `cum` segments of multicast `msg`: as the root, from a
    // receiver of its own or a co-root; as a co-root, from a member of its group (or itself).
    void Merge(uint32_t node, uint64_t msg, uint32_t from, uint32_t cum)
    {
        auto it = m_mcast.find(msg);
        if (it == m_mcast.end())
        {
            return;
        }
        Multicast& m = it->second;
        const AckPlan& plan = m_plans[m.group];
        if (node == plan.root)
        {
            RootHears(it, plan, from, cum);
            return;
        }
        Merging& g = m.coroots[node];
        uint32_t& mine = g.cum[from];
        mine = std::max(mine, cum);
        uint32_t merged = MinOf(g.cum, plan.members.at(node));
        if (merged >= m.segments && g.reported < m.segments)
        {
            g.reported = merged;
            g.timer.Cancel();
            SendAck(node, plan.root, msg, merged, KIND_MACK);
        }
        else if (merged > g.reported && !g.timer.IsPending())
        {
            Time later = Seconds(m_ackDelay);
            g.timer = Simulator::Schedule(later, &Sim::MergedLater, this, node, msg);
        }
    }

    // A co-root's delayed report of its group's progress.
    void MergedLater(uint32_t node, uint64_t msg)
    {
        auto it = m_mcast.find(msg);
        if (it == m_mcast.end())
        {
            return;
        }
        const AckPlan& plan = m_plans[it->second.group];
        Merging& g = it->second.coroots[node];
        g.reported = MinOf(g.cum, plan.members.at(node));
        SendAck(node, plan.root, msg, g.reported, KIND_MACK);
    }

    void RootHears(std::unordered_map<uint64_t, Multicast>::iterator it,
                   const AckPlan& plan,
                   uint32_t source,
                   uint32_t cum)
    {
        Multicast& m = it->second;
        uint32_t& mine = m.atRoot[source];
        mine = std::max(mine, std::min(cum, m.segments));
        uint32_t slowest = MinOf(m.atRoot, plan.sources);
        if (slowest <= m.slowest)
        {
            return;
        }
        m.slowest = slowest;
        if (slowest >= m.segments)
        {
            m_mcast.erase(it); // every receiver has it all
            return;
        }
        uint32_t context = m_nodes.Get(plan.root)->GetId();
        Simulator::ScheduleWithContext(context, Time(0), &Sim::Pump, this, plan.root);
    }

    // The lowest count, 0 until all `expected` have reported.
    static uint32_t MinOf(const std::unordered_map<uint32_t, uint32_t>& cum, uint32_t expected)
    {
        if (cum.size() < expected)
        {
            return 0;
        }
        uint32_t low = 0xFFFFFFFF;
        for (const auto& kv : cum)
        {
            low = std::min(low, kv.second);
        }
        return low;
    }

    void Credit(uint32_t sender, uint32_t segments)
    {
        m_inFlight[sender] -= segments;
        if (!m_out[sender].empty())
        {
            Simulator::ScheduleWithContext(m_nodes.Get(sender)->GetId(),
                                           Time(0),
                                           &Sim::Pump,
                                           this,
                                           sender);
        }
    }

    void Complete(uint32_t host, uint64_t msg)
    {
        delivered++;
        m_done.push_back((uint64_t(host) << 48) | msg);
        if (!m_stopping)
        {
            // let the other events of this instant run first: one batch per instant
            m_stopping = true;
            Simulator::ScheduleNow(&Sim::StopNow, this);
        }
    }

    // `bytes`: the payload a reduction chunk carries (0 for a barrier), passed on merged
    void RouterBarrier(uint32_t r, uint64_t key, uint32_t kind, uint32_t bytes)
    {
        BarrierRouter& b = m_barrier[r];
        if (!b.member)
        {
            m_unrouted++;
            return;
        }
        if (kind == KIND_RELEASE)
        {
            Release(b, key, bytes);
            return;
        }
        uint32_t& count = b.counts[key];
        if (++count < b.expected)
        {
            return;
        }
        b.counts.erase(key);
        if (b.root)
        {
            Release(b, key, bytes);
        }
        else
        {
            SendToNeighbour(b.parent, key, KIND_ARRIVE, bytes);
        }
    }

    void Release(const BarrierRouter& b, uint64_t key, uint32_t bytes)
    {
        for (uint32_t child : b.children)
        {
            SendToNeighbour(child, key, KIND_RELEASE, bytes);
        }
    }

    NodeContainer m_nodes;
    uint32_t m_hosts = 0;
    uint32_t m_hostQueue = 1000;
    std::string m_globalRate;
    std::string m_globalDelay;
    PointToPointHelper m_router;
    std::vector<Ptr<PointToPointNetDevice>> m_devices; // by device index (2 * link + end)
    Address m_broadcast = Mac48Address::GetBroadcast();
    std::vector<uint32_t> m_deviceAddress;
    std::vector<std::vector<uint32_t>> m_nodeDevices; // node -> ns-3 ifIndex -> device index
    std::deque<DeviceCounter> m_counters;
    std::deque<HostPump> m_pumps;
    std::vector<std::deque<Outgoing>> m_out;
    std::vector<uint32_t> m_inFlight;
    std::vector<uint32_t> m_hostDevice; // host -> its device index
    uint32_t m_window = 64;
    uint64_t m_unrouted = 0;
    std::vector<RouterTables> m_tables;
    std::vector<std::unordered_map<uint64_t, Receiving>> m_rx; // host -> message -> arrival
    struct Sending
    {
        uint32_t segments;
        uint32_t acked;
    };
    std::unordered_map<uint64_t, Sending> m_sending;  // unicast message -> its sender's view
    std::unordered_map<uint32_t, AckPlan> m_plans;    // multicast group -> who ACKs to whom
    std::unordered_map<uint64_t, Multicast> m_mcast;  // acknowledged multicasts in progress
    std::vector<uint64_t> m_acks;                     // ACK frames sent, per device
    uint32_t m_ackEvery = 16;
    double m_ackDelay = 0.002;
    uint32_t m_mcastWindow = 32;
    std::vector<BarrierRouter> m_barrier;
    std::vector<uint64_t> m_done;
    bool m_stopping = false;
    bool m_idle = false;
    bool m_idleAtLimit = false;
};

inline void
HostPump::TxEnd(Ptr<const Packet>)
{
    // not from inside the device's TransmitComplete, which is about to dequeue itself
    Simulator::ScheduleNow(&Sim::Pump, sim, host);
}

} // namespace netcoll_sim
