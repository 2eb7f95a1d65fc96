// netcoll's simulated transport and switch barrier on ns-3, compiled at run time by cppyy.
//
// Python builds the dragonfly through this class (so 5,000-node networks do not pay a
// Python-to-C++ call per object), sends messages through it, and drains completed messages in
// batches: no Python callback runs per packet. Every datagram carries a 16-byte header
// (message id, message size, kind); the payload bytes themselves stay in Python (ns-3 moves
// sizes, the algorithms' data is handed over when a message completes), so results are exact
// by construction of delivery, and a message completes only when every one of its segments
// crossed the simulated network.
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
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace netcoll_sim
{

using namespace ns3;

const uint32_t HEADER = 16; // message id (8), message bytes (4), kind (4)
const uint32_t OVERHEAD = 2 + 20 + 8 + HEADER; // PPP + IPv4 + UDP + ours
const uint16_t DATA_PORT = 9000;
const uint16_t BARRIER_PORT = 9001;
const uint32_t KIND_DATA = 0;
const uint32_t KIND_ARRIVE = 1;
const uint32_t KIND_RELEASE = 2;
const uint64_t RELEASE_FLAG = uint64_t(1) << 47;
const uint32_t WINDOWED = 0x80; // a unicast segment: its arrival credits the sender's window

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

struct BarrierRouter
{
    bool member = false;
    uint32_t expected = 0; // children: member hosts and child routers
    bool root = false;
    Ipv4Address parent;                  // address of the parent router on the shared link
    std::vector<Ipv4Address> children;   // hosts and child routers, in tree order
    std::map<uint64_t, uint32_t> counts; // barrier key (comm, epoch) -> arrivals
};

// A message waiting in a host's send queue; its segments are made one at a time, as the NIC
// and the send window allow, so a 5 MB message does not sit in memory as 3,600 packets.
struct Outgoing
{
    Ipv4Address dst;
    uint64_t msg;
    uint32_t bytes;
    uint32_t segments;
    uint32_t next;
    bool windowed; // unicast: counts against the window; multicast: paced by the NIC only
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

    void Configure(std::string rate,
                   std::string delay,
                   uint32_t switchQueue,
                   uint32_t hostQueue,
                   uint32_t window)
    {
        m_window = window;
        m_router.SetDeviceAttribute("DataRate", StringValue(rate));
        // room for a full netcoll segment (1460 bytes) plus our headers: no IP fragments
        m_router.SetDeviceAttribute("Mtu", UintegerValue(1600));
        m_router.SetChannelAttribute("Delay", StringValue(delay));
        m_router.SetQueue("ns3::DropTailQueue<Packet>",
                          "MaxSize",
                          QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, switchQueue)));
        m_hostQueue = hostQueue;
    }

    void SetGlobalRate(std::string rate, std::string delay)
    {
        m_globalRate = rate;
        m_globalDelay = delay;
    }

    // Nodes 0..hosts-1 are hosts, then the routers. Static routing only: global routing does
    // not finish at 5,000 nodes, and the routes come from the controller anyway.
    void CreateNodes(uint32_t hosts, uint32_t routers)
    {
        m_hosts = hosts;
        m_nodes.Create(hosts + routers);
        InternetStackHelper stack;
        // static routes only, inside a list: only Ipv4ListRouting delivers multicast locally
        Ipv4StaticRoutingHelper staticRouting;
        Ipv4ListRoutingHelper list;
        list.Add(staticRouting, 0);
        stack.SetRoutingHelper(list);
        stack.Install(m_nodes);
        for (uint32_t i = 0; i < hosts + routers; i++)
        {
            // without a queue disc, a full device queue makes the traffic-control layer drop
            bool connected =
                m_nodes.Get(i)->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
                    "TcDrop",
                    MakeCallback(&DeviceCounter::Drop, &m_stackDrops));
            NS_ABORT_MSG_UNLESS(connected, "no TcDrop trace source in this ns-3");
        }
        m_rx.resize(hosts);
        m_out.resize(hosts);
        m_inFlight.assign(hosts, 0);
        m_hostDevice.resize(hosts);
        m_barrier.resize(routers);
        for (uint32_t i = 0; i < hosts + routers; i++)
        {
            Ptr<Socket> s = Socket::CreateSocket(m_nodes.Get(i), UdpSocketFactory::GetTypeId());
            s->Bind(InetSocketAddress(Ipv4Address::GetAny(), i < hosts ? DATA_PORT : BARRIER_PORT));
            s->SetRecvCallback(MakeCallback(&Sim::Receive, this));
            m_sockets.push_back(s);
        }
    }

    // A point-to-point link between nodes a and b; returns the link index. Device 2*link is a's
    // end, 2*link+1 is b's. kind: 0 host link (a is the host), 1 local, 2 global.
    uint32_t AddLink(uint32_t a, uint32_t b, int kind, uint32_t addrA, uint32_t addrB)
    {
        PointToPointHelper helper = m_router;
        if (kind == 2 && !m_globalRate.empty())
        {
            helper.SetDeviceAttribute("DataRate", StringValue(m_globalRate));
            helper.SetChannelAttribute("Delay", StringValue(m_globalDelay));
        }
        NetDeviceContainer devices = helper.Install(m_nodes.Get(a), m_nodes.Get(b));
        if (kind == 0)
        {
            // hosts queue whole messages themselves (Pump): their NIC holds a packet or two
            Ptr<PointToPointNetDevice> dev = DynamicCast<PointToPointNetDevice>(devices.Get(0));
            dev->GetQueue()->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, m_hostQueue));
        }
        uint32_t link = m_ifaces.size() / 2;
        uint32_t addrs[2] = {addrA, addrB};
        for (uint32_t end = 0; end < 2; end++)
        {
            Ptr<NetDevice> dev = devices.Get(end);
            Ptr<Ipv4> ip = dev->GetNode()->GetObject<Ipv4>();
            int32_t iface = ip->AddInterface(dev);
            ip->AddAddress(iface,
                           Ipv4InterfaceAddress(Ipv4Address(addrs[end]), Ipv4Mask("255.255.255.255")));
            ip->SetUp(iface);
            m_ifaces.push_back(iface);
            // a deque: counters never move, so the trace sinks may point at them
            DeviceCounter& counter = m_counters.emplace_back();
            dev->TraceConnectWithoutContext("PhyTxBegin", MakeCallback(&DeviceCounter::Tx, &counter));
            dev->TraceConnectWithoutContext("MacTxDrop", MakeCallback(&DeviceCounter::Drop, &counter));
        }
        if (kind == 0)
        {
            m_hostDevice[a] = DynamicCast<PointToPointNetDevice>(devices.Get(0));
            HostPump& pump = m_pumps.emplace_back(HostPump{this, a});
            devices.Get(0)->TraceConnectWithoutContext("PhyTxEnd",
                                                       MakeCallback(&HostPump::TxEnd, &pump));
        }
        return link;
    }

    // The IPv4 interface index of device d (2 * link for its a end, 2 * link + 1 for b).
    uint32_t Interface(uint32_t device) const
    {
        return m_ifaces[device];
    }

    Ptr<Ipv4StaticRouting> Routing(uint32_t node)
    {
        Ipv4StaticRoutingHelper helper;
        return helper.GetStaticRouting(m_nodes.Get(node)->GetObject<Ipv4>());
    }

    void AddNetworkRoute(uint32_t node, uint32_t net, uint32_t mask, uint32_t iface)
    {
        Routing(node)->AddNetworkRouteTo(Ipv4Address(net), Ipv4Mask(mask), iface);
    }

    void AddHostRoute(uint32_t node, uint32_t dst, uint32_t iface)
    {
        Routing(node)->AddHostRouteTo(Ipv4Address(dst), iface);
    }

    void SetHostDefaults(uint32_t node, uint32_t iface)
    {
        Ptr<Ipv4StaticRouting> r = Routing(node);
        r->SetDefaultRoute(Ipv4Address("0.0.0.0"), iface);
        r->SetDefaultMulticastRoute(iface);
    }

    void AddMulticastRoute(uint32_t node,
                           uint32_t origin,
                           uint32_t group,
                           uint32_t inIface,
                           const std::vector<uint32_t>& outIfaces)
    {
        Routing(node)->AddMulticastRoute(Ipv4Address(origin), Ipv4Address(group), inIface, outIfaces);
    }

    // -- barrier state of router r (index among routers) ------------------------------------

    void BarrierRouterSet(uint32_t r, uint32_t expected, bool root, uint32_t parent)
    {
        BarrierRouter& b = m_barrier[r];
        b.member = true;
        b.expected = expected;
        b.root = root;
        b.parent = Ipv4Address(parent);
        b.children.clear();
        b.counts.clear();
    }

    void BarrierRouterChild(uint32_t r, uint32_t child)
    {
        m_barrier[r].children.push_back(Ipv4Address(child));
    }

    // -- traffic ------------------------------------------------------------------------------

    // A message of `bytes` from host `src` to address `dst` (a host or a multicast group),
    // cut into segments; each receiver reports it complete once all its segments arrived.
    // A host sends its messages in order, one segment whenever its NIC is free, and keeps at
    // most `window` unicast segments on their way (credited back when they arrive, as a
    // lossless fabric's credits or the engine's window would): a bounded host window, like
    // the real engine's, instead of an open-loop flood no finite switch buffer survives.
    void Send(uint32_t src, uint32_t dst, uint64_t msg, uint32_t bytes)
    {
        Ipv4Address address(dst);
        uint32_t segments = bytes == 0 ? 1 : (bytes + segment - 1) / segment;
        m_out[src].push_back(Outgoing{address, msg, bytes, segments, 0, !address.IsMulticast()});
        Pump(src);
    }

    // Send what the NIC and the window allow from host h's queue.
    void Pump(uint32_t h)
    {
        std::deque<Outgoing>& queue = m_out[h];
        Ptr<Queue<ns3::Packet>> nic = m_hostDevice[h]->GetQueue();
        while (!queue.empty())
        {
            Outgoing& o = queue.front();
            if (o.windowed && m_inFlight[h] >= m_window)
            {
                return; // a segment's arrival pumps again
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
            SendSegment(h, o.dst, DATA_PORT, o.msg, o.bytes, kind, len);
            if (o.windowed)
            {
                m_inFlight[h]++;
            }
            if (++o.next == o.segments)
            {
                queue.pop_front();
            }
        }
    }

    // A host arrives at a barrier (key names communicator and epoch): one ARRIVE to its router.
    // Its RELEASE completes as message id RELEASE_FLAG | key.
    void Arrive(uint32_t host, uint64_t key)
    {
        SendTo(host, m_routerOfHost[host], BARRIER_PORT, key, 0, KIND_ARRIVE);
    }

    // A host's contribution of `bytes` to one chunk of an in-network reduction (key names
    // communicator, epoch and chunk): the result completes as RELEASE_FLAG | key.
    void Contribute(uint32_t host, uint64_t key, uint32_t bytes)
    {
        SendSegment(host, m_routerOfHost[host], BARRIER_PORT, key, bytes, KIND_ARRIVE, bytes);
    }

    void SetRouterOfHost(uint32_t host, uint32_t routerAddr)
    {
        if (m_routerOfHost.size() <= host)
        {
            m_routerOfHost.resize(host + 1);
        }
        m_routerOfHost[host] = Ipv4Address(routerAddr);
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

    // packets the traffic-control layers dropped in front of full device queues
    uint64_t StackDrops() const
    {
        return m_stackDrops.drops;
    }

    uint32_t Devices() const
    {
        return m_counters.size();
    }

    void ResetCounters()
    {
        for (auto& c : m_counters)
        {
            c = DeviceCounter();
        }
        m_stackDrops = DeviceCounter();
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
            pending.clear();
        }
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

    void SendTo(uint32_t src, Ipv4Address dst, uint16_t port, uint64_t msg, uint32_t bytes, uint32_t kind)
    {
        SendSegment(src, dst, port, msg, bytes, kind, 0);
    }

    // One datagram: our header, then `len` bytes of the message (zeros: the data is Python's).
    void SendSegment(uint32_t src,
                     Ipv4Address dst,
                     uint16_t port,
                     uint64_t msg,
                     uint32_t bytes,
                     uint32_t kind,
                     uint32_t len)
    {
        uint8_t header[HEADER];
        std::memcpy(header, &msg, 8);
        std::memcpy(header + 8, &bytes, 4);
        std::memcpy(header + 12, &kind, 4);
        Ptr<Packet> p = Create<Packet>(header, HEADER);
        if (len)
        {
            p->AddAtEnd(Create<Packet>(len));
        }
        m_sockets[src]->SendTo(p, 0, InetSocketAddress(dst, port));
    }

    void Credit(uint32_t sender)
    {
        m_inFlight[sender]--;
        if (!m_out[sender].empty())
        {
            Simulator::ScheduleWithContext(m_nodes.Get(sender)->GetId(),
                                           Time(0),
                                           &Sim::Pump,
                                           this,
                                           sender);
        }
    }

    void Receive(Ptr<Socket> socket)
    {
        uint32_t node = socket->GetNode()->GetId();
        Ptr<ns3::Packet> p;
        while ((p = socket->Recv()))
        {
            uint8_t header[HEADER];
            p->CopyData(header, HEADER);
            uint64_t msg;
            uint32_t bytes;
            uint32_t kind;
            std::memcpy(&msg, header, 8);
            std::memcpy(&bytes, header + 8, 4);
            std::memcpy(&kind, header + 12, 4);
            if (node >= m_hosts)
            {
                RouterBarrier(node - m_hosts, msg, kind, bytes);
                continue;
            }
            if (kind == KIND_RELEASE)
            {
                Complete(node, msg | RELEASE_FLAG);
                continue;
            }
            if (kind & WINDOWED)
            {
                Credit(kind >> 8); // the sender's host index rides above the kind
            }
            uint32_t segments = bytes == 0 ? 1 : (bytes + segment - 1) / segment;
            if (segments == 1)
            {
                Complete(node, msg);
                continue;
            }
            auto& pending = m_rx[node];
            uint32_t& got = pending[msg];
            if (++got == segments)
            {
                pending.erase(msg);
                Complete(node, msg);
            }
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
        uint32_t node = m_hosts + r;
        if (!b.member)
        {
            return;
        }
        if (kind == KIND_RELEASE)
        {
            for (const Ipv4Address& child : b.children)
            {
                SendFromRouter(node, child, key, KIND_RELEASE, bytes);
            }
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
            for (const Ipv4Address& child : b.children)
            {
                SendFromRouter(node, child, key, KIND_RELEASE, bytes);
            }
        }
        else
        {
            SendFromRouter(node, b.parent, key, KIND_ARRIVE, bytes);
        }
    }

    void SendFromRouter(uint32_t node, Ipv4Address dst, uint64_t key, uint32_t kind, uint32_t bytes)
    {
        uint8_t header[HEADER];
        std::memcpy(header, &key, 8);
        std::memcpy(header + 8, &bytes, 4);
        std::memcpy(header + 12, &kind, 4);
        Ptr<ns3::Packet> p = Create<ns3::Packet>(header, HEADER);
        if (bytes)
        {
            p->AddAtEnd(Create<ns3::Packet>(bytes));
        }
        // hosts listen on the data port, routers on the barrier port; hosts come first
        uint16_t port = kind == KIND_ARRIVE ? BARRIER_PORT : m_childPort(dst);
        m_sockets[node]->SendTo(p, 0, InetSocketAddress(dst, port));
    }

    uint16_t m_childPort(Ipv4Address dst) const
    {
        // host addresses are 10.x.x.x, router addresses are not (see addressing.py)
        return (dst.Get() >> 24) == 10 ? DATA_PORT : BARRIER_PORT;
    }

    NodeContainer m_nodes;
    uint32_t m_hosts = 0;
    uint32_t m_hostQueue = 1000;
    std::string m_globalRate;
    std::string m_globalDelay;
    PointToPointHelper m_router;
    std::vector<Ptr<Socket>> m_sockets;
    std::vector<int32_t> m_ifaces;
    std::deque<DeviceCounter> m_counters;
    std::deque<HostPump> m_pumps;
    std::vector<std::deque<Outgoing>> m_out;
    std::vector<uint32_t> m_inFlight;
    std::vector<Ptr<PointToPointNetDevice>> m_hostDevice;
    uint32_t m_window = 64;
    DeviceCounter m_stackDrops;
    std::vector<Ipv4Address> m_routerOfHost;
    std::vector<std::unordered_map<uint64_t, uint32_t>> m_rx;
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
