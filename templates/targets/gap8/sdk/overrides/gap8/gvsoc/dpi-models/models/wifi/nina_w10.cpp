// edgernn override of the GAP SDK file at this path (gap8/gvsoc/dpi-models/models/wifi/nina_w10.cpp, the same in
// release-v4.8.0 and at a2302650). Upstream's model of the deck's WiFi module (a u-blox NINA-W102, an ESP32)
// spoke GreenWaves' own protocol: TX only, as a TCP client. This one behaves as Bitcraze's aideck-esp-firmware
// does, so that a GAP8 firmware written for the real deck's CPX link runs unchanged in GVSOC:
//
//   GAP8 side (the ESP32's spi_transport): an SPI slave on spim1/cs0, mode 0, most significant bit first. The
//   ESP32 raises its ready line (GAP8 GPIO18) when it has set up a transfer: when it has a packet for the
//   GAP8, or when the GAP8 has raised its own line (GAP8 GPIO3, a rising edge) to say it has one. It lowers
//   the line when the GAP8 ends the transfer (chip select up). Both sides shift a buffer of
//   [u16 length, little-endian][2-byte CPX header][data], the length counting header and data (0: nothing),
//   at most 1022 (the MTU); the rest of the buffer is don't-care.
//
//   Host side (the ESP32's wifi transport): a TCP server on 127.0.0.1 (the deck's AP at 192.168.4.1 in
//   the air), one client at a time. A frame is the same [u16 length][header][data]. A second client is
//   accepted and closed at once: the host learns it at its first read, instead of waiting on a backlog
//   the real firmware never accepts from. As on the deck, a client's arrival is told to the GAP8 with
//   WIFI_CTRL 0x32.
//
//   Routing (the ESP32's router): by destination only. GAP8 -> WIFI_HOST goes to the client (dropped when
//   there is none, as on the deck); WIFI_HOST -> GAP8 goes to the GAP8's queue (10 packets; the client's
//   socket is not read while it is full). A packet larger than the other side's MTU is split there, the
//   last-packet flag on its last part only. There is no STM32 here: packets for it are counted and dropped.
//
// Configuration (the run's JSON, written by edgernn/targets/gap8/gvsoc.py): "port", the TCP port.
// Built with EDGERNN_ESP32_FAULT=1, the model loses the last byte of every packet it passes to the host:
// the deliberately broken ESP32 that edgernn's CPX self-test must reject (tests/targets/gap8/).

#include "dpi/models.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#ifndef EDGERNN_ESP32_FAULT
#define EDGERNN_ESP32_FAULT 0
#endif

namespace {

const int MTU = 1022;                 // header + data, on SPI and on WiFi alike
const size_t TO_GAP8_QUEUE = 10;      // the ESP32's SPI transmit queue, in packets
const int TARGET_STM32 = 1, TARGET_ESP32 = 2, TARGET_HOST = 3, TARGET_GAP8 = 4;
const int FUNCTION_WIFI_CTRL = 4;
const uint8_t LAST_PACKET = 0x40;

typedef std::vector<uint8_t> Packet;  // [header][data]

int destination(const Packet &p) { return p[0] & 0x7; }

// A packet too large for an MTU, in parts that fit it: each carries the header, the last-packet flag kept
// on the last part only (as splitAndSend in the ESP32's router).
std::vector<Packet> split(const Packet &p, int mtu)
{
  std::vector<Packet> parts;
  const size_t room = (size_t)mtu - 2;
  size_t at = 2;
  do {
    size_t n = p.size() - at < room ? p.size() - at : room;
    Packet part(p.begin(), p.begin() + 2);
    part.insert(part.end(), p.begin() + at, p.begin() + at + n);
    at += n;
    if (at < p.size())
      part[0] &= (uint8_t)~LAST_PACKET;
    parts.push_back(part);
  } while (at < p.size());
  return parts;
}

}  // namespace

class Esp32;

class Esp32_spi_itf : public Qspi_itf
{
public:
  Esp32_spi_itf(Esp32 *top) : top(top) {}
  void edge(int64_t timestamp, int data_0, int data_1, int data_2, int data_3, int mask);
  void cs_edge(int64_t timestamp, int cs);

private:
  Esp32 *top;
};

class Esp32_ready_itf : public Gpio_itf
{
public:
  void edge(int64_t timestamp, int data) {}
};

class Esp32_gap_rtt_itf : public Gpio_itf
{
public:
  Esp32_gap_rtt_itf(Esp32 *top) : top(top) {}
  void edge(int64_t timestamp, int data);

private:
  Esp32 *top;
};

class Esp32 : public Dpi_model
{
public:
  Esp32(js::config *config, void *handle);
  void start();

  // simulation side
  void spi_bit(int mosi);
  void spi_cs(int cs);
  void gap_rtt(int level);

  void flush_at_exit(int timeout_ms);

private:
  static void task_stub(Esp32 *_this) { _this->task(); }
  void task();
  void route_from_gap8(const Packet &p);

  // host side
  bool listen_on(int port);
  void accept_loop();
  void client_loop(int fd);
  void sender_loop();
  int take_host_frames(std::vector<uint8_t> &wire);
  bool read_exactly(int fd, uint8_t *buf, size_t n);
  bool send_all(int fd, const uint8_t *buf, size_t n, int timeout_ms);

  Esp32_spi_itf *spi;
  Esp32_ready_itf *ready;
  Esp32_gap_rtt_itf *rtt;

  // the transfer, touched by the simulation only
  bool armed = false;          // ready is up: the GAP8 may clock the buffer
  bool selected = false;       // chip select is down
  bool rtt_raised = false;     // the GAP8 raised its line since the last transfer was set up
  std::vector<uint8_t> tx;     // what the ESP32 shifts out
  std::vector<uint8_t> rx;     // what it has shifted in
  size_t bit_index = 0;
  uint8_t rx_byte = 0;
  unsigned long unarmed_transfers = 0, dropped_stm32 = 0, malformed = 0;

  // shared with the socket threads
  std::mutex lock;
  std::condition_variable space_for_gap8;   // to_gap8 has room
  std::condition_variable for_host;         // to_host has packets
  std::deque<Packet> to_gap8;
  std::deque<Packet> to_host;
  int client = -1;
  int listener = -1;
  int port = 0;
};

static Esp32 *exit_flush_model = NULL;

static void flush_at_exit(void)
{
  if (exit_flush_model)
    exit_flush_model->flush_at_exit(2000);
}

Esp32::Esp32(js::config *config, void *handle) : Dpi_model(config, handle)
{
  this->spi = new Esp32_spi_itf(this);
  this->create_itf("input", static_cast<Dpi_itf *>(this->spi));
  this->ready = new Esp32_ready_itf();
  this->create_itf("gpio_ready", static_cast<Dpi_itf *>(this->ready));
  this->rtt = new Esp32_gap_rtt_itf(this);
  this->create_itf("gpio_gap_rtt", static_cast<Dpi_itf *>(this->rtt));

  js::config *port_config = config->get("port");
  this->port = port_config ? atoi(port_config->get_str().c_str()) : 5000;
  signal(SIGPIPE, SIG_IGN);
  if (!this->listen_on(this->port))
  {
    // edgernn's launcher reads this line (edgernn/targets/gap8/gvsoc.py)
    fprintf(stderr, "edgernn-esp32: cannot listen on 127.0.0.1:%d: %s\n", this->port, strerror(errno));
    return;
  }
  fprintf(stderr, "edgernn-esp32: listening on 127.0.0.1:%d\n", this->port);
  if (!exit_flush_model)
  {
    exit_flush_model = this;
    atexit(::flush_at_exit);
  }
  new std::thread(&Esp32::accept_loop, this);
  new std::thread(&Esp32::sender_loop, this);
}

void Esp32::start()
{
  this->create_task((void *)&Esp32::task_stub, this);
}

// ---- the GAP8 side: the ESP32's SPI slave, on the simulation's thread ----

// The ESP32's spi_task: set a transfer up when there is something to send or the GAP8 asked, raise the
// ready line, let the GAP8 clock it, lower the line, route what came in.
void Esp32::task()
{
  this->ready->set_data(0);
  while (1)
  {
    Packet out;
    bool have = false;
    while (1)
    {
      {
        std::unique_lock<std::mutex> guard(this->lock);
        if (!this->to_gap8.empty())
        {
          out = this->to_gap8.front();
          this->to_gap8.pop_front();
          have = true;
          this->space_for_gap8.notify_all();
        }
      }
      if (have || this->rtt_raised)
        break;
      this->wait_event();
    }
    this->rtt_raised = false;

    this->tx.assign(2 + MTU, 0);
    if (have)
    {
      this->tx[0] = (uint8_t)(out.size() & 0xFF);
      this->tx[1] = (uint8_t)(out.size() >> 8);
      memcpy(&this->tx[2], out.data(), out.size());
    }
    this->armed = true;
    this->ready->set_data(1);
    while (this->armed)
      this->wait_event();
    this->ready->set_data(0);

    if (this->rx.size() >= 2)
    {
      size_t length = this->rx[0] | (this->rx[1] << 8);
      if (length == 0)
        continue;
      if (length < 2 || length > (size_t)MTU || length + 2 > this->rx.size())
      {
        this->malformed++;
        fprintf(stderr, "edgernn-esp32: dropped a malformed transfer from the GAP8 (length %zu, %zu bytes clocked)\n",
                length, this->rx.size());
        continue;
      }
      this->route_from_gap8(Packet(this->rx.begin() + 2, this->rx.begin() + 2 + length));
    }
  }
}

void Esp32::route_from_gap8(const Packet &p)
{
  switch (destination(p))
  {
  case TARGET_HOST: {
    std::unique_lock<std::mutex> guard(this->lock);
    if (this->client < 0)
      return;                                   // no client: dropped, as on the deck
    for (Packet &part : split(p, MTU))
    {
#if EDGERNN_ESP32_FAULT
      if (part.size() > 2)
        part.pop_back();
#endif
      this->to_host.push_back(part);
    }
    this->for_host.notify_all();
    return;
  }
  case TARGET_STM32:
    this->dropped_stm32++;
    return;
  default:
    return;                                     // the ESP32's own functions: nothing edgernn uses
  }
}

void Esp32::spi_cs(int cs)
{
  if (cs == 0 && !this->selected)
  {
    this->selected = true;
    this->bit_index = 0;
    this->rx.clear();
    if (!this->armed)
      this->unarmed_transfers++;
    // mode 0: the first bit is on MISO as soon as the slave is selected
    this->spi->set_data(this->armed && !this->tx.empty() ? (this->tx[0] >> 7) & 1 : 0);
  }
  else if (cs == 1 && this->selected)
  {
    this->selected = false;
    if (this->armed)
    {
      this->armed = false;
      this->raise_event();
    }
  }
}

void Esp32::spi_bit(int mosi)
{
  if (!this->selected)
    return;
  this->rx_byte = (uint8_t)((this->rx_byte << 1) | (mosi & 1));
  this->bit_index++;
  if ((this->bit_index & 7) == 0 && this->armed)
    this->rx.push_back(this->rx_byte);
  // the next bit, which the master samples at its next edge
  size_t byte = this->bit_index >> 3;
  int value = 0;
  if (this->armed && byte < this->tx.size())
    value = (this->tx[byte] >> (7 - (this->bit_index & 7))) & 1;
  this->spi->set_data(value);
}

void Esp32::gap_rtt(int level)
{
  if (level)
  {
    this->rtt_raised = true;
    this->raise_event();
  }
}

void Esp32_spi_itf::edge(int64_t timestamp, int data_0, int data_1, int data_2, int data_3, int mask)
{
  this->top->spi_bit(data_0);
}

void Esp32_spi_itf::cs_edge(int64_t timestamp, int cs)
{
  this->top->spi_cs(cs);
}

void Esp32_gap_rtt_itf::edge(int64_t timestamp, int data)
{
  this->top->gap_rtt(data);
}

// ---- the host side: the ESP32's TCP server, on threads of its own ----

bool Esp32::listen_on(int port)
{
  struct sockaddr_in addr;
  int yes = 1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  this->listener = socket(PF_INET, SOCK_STREAM, 0);
  if (this->listener < 0)
    return false;
  setsockopt(this->listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (bind(this->listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(this->listener, 2) != 0)
  {
    int err = errno;
    close(this->listener);
    this->listener = -1;
    errno = err;
    return false;
  }
  return true;
}

void Esp32::accept_loop()
{
  while (1)
  {
    int fd = accept(this->listener, NULL, NULL);
    if (fd < 0)
    {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return;
    }
    {
      std::unique_lock<std::mutex> guard(this->lock);
      if (this->client >= 0)
      {
        close(fd);                              // one client at a time
        fprintf(stderr, "edgernn-esp32: refused a second client\n");
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      this->client = fd;
      // as on the deck: the GAP8 hears that a client connected (WIFI_CTRL 0x32, 1)
      Packet hello = {(uint8_t)(TARGET_GAP8 | (TARGET_ESP32 << 3) | LAST_PACKET), FUNCTION_WIFI_CTRL, 0x32, 1};
      this->to_gap8.push_back(hello);
    }
    this->raise_event_from_ext();
    std::thread(&Esp32::client_loop, this, fd).detach();
  }
}

bool Esp32::read_exactly(int fd, uint8_t *buf, size_t n)
{
  while (n > 0)
  {
    ssize_t got = recv(fd, buf, n, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    buf += got;
    n -= (size_t)got;
  }
  return true;
}

void Esp32::client_loop(int fd)
{
  uint8_t length_bytes[2];
  std::vector<uint8_t> buffer;
  while (this->read_exactly(fd, length_bytes, 2))
  {
    size_t length = length_bytes[0] | (length_bytes[1] << 8);
    if (length < 2 || length > (size_t)MTU)
    {
      fprintf(stderr, "edgernn-esp32: a host frame of %zu bytes is outside 2..%d: closing the connection\n", length, MTU);
      break;
    }
    buffer.resize(length);
    if (!this->read_exactly(fd, buffer.data(), length))
      break;
    Packet p(buffer.begin(), buffer.end());
    if (destination(p) != TARGET_GAP8)
      continue;                                 // the STM32 and the ESP32's own functions: not modelled
    for (Packet &part : split(p, MTU))
    {
      std::unique_lock<std::mutex> guard(this->lock);
      this->space_for_gap8.wait(guard, [this] { return this->to_gap8.size() < TO_GAP8_QUEUE; });
      this->to_gap8.push_back(part);
    }
    this->raise_event_from_ext();
  }
  std::unique_lock<std::mutex> guard(this->lock);
  if (this->client == fd)
  {
    this->client = -1;
    this->to_host.clear();
  }
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

bool Esp32::send_all(int fd, const uint8_t *buf, size_t n, int timeout_ms)
{
  while (n > 0)
  {
    if (timeout_ms >= 0)
    {
      struct pollfd out = {fd, POLLOUT, 0};
      if (poll(&out, 1, timeout_ms) <= 0)
        return false;
    }
    ssize_t sent = send(fd, buf, n, MSG_NOSIGNAL);
    if (sent < 0)
    {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return false;
    }
    buf += sent;
    n -= (size_t)sent;
  }
  return true;
}

// The packets queued for the host as TCP frames ([u16 length][packet] each), taken off the queue; the lock is held.
int Esp32::take_host_frames(std::vector<uint8_t> &wire)
{
  wire.clear();
  while (!this->to_host.empty())
  {
    const Packet &p = this->to_host.front();
    wire.push_back((uint8_t)(p.size() & 0xFF));
    wire.push_back((uint8_t)(p.size() >> 8));
    wire.insert(wire.end(), p.begin(), p.end());
    this->to_host.pop_front();
  }
  return this->client;
}

void Esp32::sender_loop()
{
  std::vector<uint8_t> wire;
  while (1)
  {
    int fd;
    {
      std::unique_lock<std::mutex> guard(this->lock);
      this->for_host.wait(guard, [this] { return !this->to_host.empty(); });
      fd = this->take_host_frames(wire);
    }
    if (fd >= 0)
      this->send_all(fd, wire.data(), wire.size(), -1);
  }
}

// What the GAP8 sent last (its final line, just before it ends) reaches the client before the simulator exits.
void Esp32::flush_at_exit(int timeout_ms)
{
  std::vector<uint8_t> wire;
  int fd;
  {
    std::unique_lock<std::mutex> guard(this->lock);
    fd = this->take_host_frames(wire);
  }
  if (fd >= 0 && !wire.empty())
    this->send_all(fd, wire.data(), wire.size(), timeout_ms);
}

extern "C" Dpi_model *dpi_model_new(js::config *config, void *handle)
{
  return new Esp32(config, handle);
}
