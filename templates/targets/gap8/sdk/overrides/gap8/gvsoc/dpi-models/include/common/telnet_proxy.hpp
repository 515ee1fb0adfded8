// edgernn override of the GAP SDK file at this path (commit a2302650): the client socket is kept
// so that bytes the UART sent are flushed to it when the simulator exits (see telnet_proxy.cpp).
#pragma once
#include <thread>
#include <mutex>
#include <condition_variable>
#include <queue>

class Telnet_proxy
{
  public:
    void pop_byte(uint8_t*);
    void push_byte(uint8_t*);
    Telnet_proxy(int);
    void flush_to_client(int timeout_ms);

  private:
    bool open_telnet_socket(int port);

    std::mutex rx_mutex;
    std::mutex tx_mutex;
    std::condition_variable rx_cond;
    std::condition_variable tx_cond;
    std::queue<uint8_t> rx_queue;
    std::queue<uint8_t> tx_queue;
    void push_byte_from_proxy(uint8_t*);
    int pop_byte_from_client(uint8_t*);
    bool send_queued(int socket_fd, int timeout_ms);

    void listener(void);
    void proxy_loop(int);

    int telnet_socket;
    int telnet_port;
    int client_fd = -1;                 // guarded by tx_mutex

    std::thread *loop_thread;
    std::thread *listener_thread;
};
