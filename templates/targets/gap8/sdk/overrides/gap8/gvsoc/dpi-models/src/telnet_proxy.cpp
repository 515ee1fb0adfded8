// edgernn override of the GAP SDK file at this path (commit a2302650). Two changes:
//  - the socket listens on the loopback interface only;
//  - what the UART sent reaches the client: the loop sends every queued byte at each turn (the
//    original sent one byte per 10 us poll), and the bytes still queued when the simulator exits
//    (the firmware's last line, sent just before it ends) are flushed to the client at exit.
#include "dpi/models.hpp"
#include <common/telnet_proxy.hpp>
#include <stdint.h>
#include <unistd.h>
#include <thread>
#include <condition_variable>
#include <iostream>
#include <queue>
#include <mutex>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <vector>

bool Telnet_proxy::open_telnet_socket(int telnet_port)
{
  struct sockaddr_in addr;
  int yes = 1;
  addr.sin_family = AF_INET;
  addr.sin_port = htons(telnet_port);
  // edgernn: the simulated UART listens on the loopback interface only, never on the network.
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  memset(addr.sin_zero, '\0', sizeof(addr.sin_zero));

  this->telnet_socket = socket(PF_INET, SOCK_STREAM, 0);

  if(this->telnet_socket < 0)
  {
    //fprintf(stderr, "Unable to create comm socket: %s\n", strerror(errno));
    return false;
  }

  if(setsockopt(this->telnet_socket, SOL_SOCKET, SO_REUSEADDR, &yes,
        sizeof(int)) == -1) {
    //fprintf(stderr, "Unable to setsockopt on the socket: %s\n", strerror(errno));
    return false;
  }

  if(bind(this->telnet_socket, (struct sockaddr *)&addr, sizeof(addr)) == -1) {
    //fprintf(stderr, "Unable to bind the socket: %s\n", strerror(errno));
    return false;
  }

  if(listen(this->telnet_socket, 1) == -1) {
    //fprintf(stderr, "Unable to listen: %s\n", strerror(errno));
    return false;
  }
  return true;
}

void Telnet_proxy::pop_byte(uint8_t *byte)
{
  std::unique_lock<std::mutex> lock(this->rx_mutex);
  while(rx_queue.empty())
  {
    rx_cond.wait(lock);
  }
  *byte = rx_queue.front();
  rx_queue.pop();
}

void Telnet_proxy::push_byte_from_proxy(uint8_t *byte)
{
  std::unique_lock<std::mutex> lock(this->rx_mutex);
  rx_queue.push(*byte);
  rx_cond.notify_one();
}

/**
 * Attempt to pop a byte from client
 * non blocking, returns -1 if no byte is availbale, 0 otherwise
 * 
 */
int Telnet_proxy::pop_byte_from_client(uint8_t *byte)
{
  std::unique_lock<std::mutex> lock(this->tx_mutex);
  if(tx_queue.empty())
  {
    return -1;
  }
  *byte = tx_queue.front();
  tx_queue.pop();
  return 0;
}

void Telnet_proxy::push_byte(uint8_t *byte)
{
  std::unique_lock<std::mutex> lock(this->tx_mutex);
  tx_queue.push(*byte);
}

void Telnet_proxy::listener(void)
{
  int client_fd;
  while(1)
  {
    if((client_fd = accept(telnet_socket, NULL, NULL)) == -1) {
      if(errno == EAGAIN) continue;
      std::cerr << "failed to accept connection" << strerror(errno) << std::endl;
      return;
    }
    std::cerr << "telnet connected" << std::endl;
    {
      std::unique_lock<std::mutex> lock(this->tx_mutex);
      this->client_fd = client_fd;
    }
    this->loop_thread = new std::thread(&Telnet_proxy::proxy_loop, this, client_fd);
    this->loop_thread->join();
    {
      std::unique_lock<std::mutex> lock(this->tx_mutex);
      this->client_fd = -1;
    }
  }
}

void Telnet_proxy::proxy_loop(int socket_fd)
{
  // structure to poll our socket
  struct pollfd poll_socket = {socket_fd, POLLIN, 0};
  // 10 ms timeout
  struct timespec ppoll_timeout = {0, 10000};
  sigset_t sigmask;
  // fetch old signal set
  sigprocmask(0, NULL, &sigmask);
  while(1)
  {
    int ret = 0;
    uint8_t byte = 0;

    ret = recv(socket_fd, (void *)&byte, sizeof(uint8_t), MSG_DONTWAIT);
    if(ret != sizeof(uint8_t))
    {
      if(ret == -1)
      {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
        {
          ppoll(&poll_socket, 1, &ppoll_timeout, &sigmask);
        }
        else
        {
          std::cerr << "recv call ended with error " << strerror(errno) << std::endl;
          return;
        }
      }
      if(ret == 0)
      {
        std::cerr << "did not recv anything" << std::endl;
        return;
      }
    }
    else
    {
      this->push_byte_from_proxy(&byte);
    }

    if(!this->send_queued(socket_fd, -1))
    {
      std::cerr << "send call ended with error " << strerror(errno) << std::endl;
      return;
    }
  }
}

/**
 * Send every queued TX byte to socket_fd, in order, holding tx_mutex so that the loop thread and the
 * exit flush never interleave. timeout_ms < 0: block until sent; otherwise give up after waiting
 * that long for the socket to take more. Returns false on a socket error or timeout.
 */
bool Telnet_proxy::send_queued(int socket_fd, int timeout_ms)
{
  std::unique_lock<std::mutex> lock(this->tx_mutex);
  std::vector<uint8_t> pending;
  pending.reserve(this->tx_queue.size());
  while(!this->tx_queue.empty())
  {
    pending.push_back(this->tx_queue.front());
    this->tx_queue.pop();
  }
  size_t sent = 0;
  while(sent < pending.size())
  {
    if(timeout_ms >= 0)
    {
      struct pollfd out = {socket_fd, POLLOUT, 0};
      if(poll(&out, 1, timeout_ms) <= 0)
        return false;
    }
    ssize_t ret = send(socket_fd, pending.data() + sent, pending.size() - sent, MSG_NOSIGNAL);
    if(ret < 0)
    {
      if(errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return false;
    }
    sent += (size_t)ret;
  }
  return true;
}

static Telnet_proxy *exit_flush_proxy = NULL;

static void flush_at_exit(void)
{
  if(exit_flush_proxy)
    exit_flush_proxy->flush_to_client(2000);
}

/** What the UART sent and the loop thread has not sent yet goes to the connected client, if any. */
void Telnet_proxy::flush_to_client(int timeout_ms)
{
  int fd;
  {
    std::unique_lock<std::mutex> lock(this->tx_mutex);
    fd = this->client_fd;
  }
  if(fd >= 0)
    this->send_queued(fd, timeout_ms);
}

Telnet_proxy::Telnet_proxy(int telnet_port)
{
  if(!exit_flush_proxy)
  {
    exit_flush_proxy = this;
    atexit(flush_at_exit);
  }
  if (this->open_telnet_socket(telnet_port))
  {
    this->telnet_port = telnet_port;
    this->listener_thread = new std::thread(&Telnet_proxy::listener, this);
  }
  else
  {
    std::cerr << "open telnet port failed" << std::endl;
  }
}
