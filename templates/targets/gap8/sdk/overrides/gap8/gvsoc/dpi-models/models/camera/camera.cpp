// edgernn override of the GAP SDK file at this path (gap8/gvsoc/dpi-models/models/camera/camera.cpp, the same in
// release-v4.8.0 and at a2302650): GVSOC's model of the AI-deck's camera, a Himax HM01B0 on the CPI and I2C.
// Upstream's model plays back image files (the "image-stream" setting, a path with %d for the frame index) only
// through GraphicsMagick, and without it sends black frames; it ignores the sensor's registers and streams from
// power-up. Two changes, so that edgernn's camera application (templates/targets/gap8/app/) can be proven
// frame by frame from image files (`edgernn validate OUT --data frames.npy`):
//
//   1. Raw frames. A stream path ending in ".raw" is read as raw pixels, width x height bytes in gray mode
//      (3 bytes, R G B, otherwise), row by row, with no header and no GraphicsMagick, as GVSOC's newer Himax
//      model (gvsoc/gvsoc/models/devices/camera/himax.cpp) reads them. Files are taken in turn from index 0;
//      when the next index has no file, the stream starts again at 0 (as upstream). A short or missing
//      first file stops the simulation with a message.
//   2. The sensor's streaming modes, as the HM01B0's datasheet gives them, through its I2C registers:
//      MODE_SELECT (0x0100): 0 standby, 1 streaming, 3 streaming N frames (N in PMU_AUTOSLEEP_FRAMECNT,
//      0x3020), after which it returns to standby by itself; SW_RESET (0x0103) puts it in standby. A frame
//      starts only while the sensor streams, and a frame that has started is sent whole. Writing 3 while a
//      frame is being sent asks for N more after it (the count is taken as each frame starts). Reading
//      MODE_SELECT gives the mode. So one image file is one frame the sensor sent, and a firmware that
//      triggers one frame at a time receives the files in order, however long it computes between them.
//      The model's ID (0x0000, 0x0001: 0x01B0) reads as upstream's did.
//
// The pixel clock, the blanking and the CPI timing are upstream's. Nothing else changes.
/*
 * Copyright (C) 2018 ETH Zurich and University of Bologna
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/*
 * Authors: Germain Haugou, ETH (germain.haugou@iis.ee.ethz.ch)
 */

#include "dpi/models.hpp"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#ifdef __MAGICK__
#include <Magick++.h>
#endif

#ifdef __MAGICK__
using namespace Magick;
#endif
using namespace std;

class Camera;


class Camera_i2c_itf : public I2c_itf
{
public:
  Camera_i2c_itf(Camera *top) : top(top) {}
  void tx_edge(int64_t timestamp, int scl, int sda);

private:
  Camera *top;
};



class Camera_i2c_slave : public I2c_slave
{
public:
  Camera_i2c_slave(Camera *top, unsigned int address);

  void start(unsigned int address, bool is_write);
  void handle_byte(uint8_t byte);
  void stop();
  void ack();
  void get_data();

private:
  Camera *top;
  int pending_bytes;
  int pending_addr;
};


class Camera_stream {

public:
  Camera_stream(Camera *top, string path, int color_mode);
  bool fetch_image();
  bool fetch_raw(const char *path);
  unsigned int get_pixel();
  void set_image_size(int width, int height);

private:
  Camera *top;
  string stream_path;
  int frame_index;
#ifdef __MAGICK__
  Image image;
#endif
  int width;
  int height;
#ifdef __MAGICK__
  PixelPacket *image_buffer;
#endif
  int current_pixel;
  int nb_pixel;
  int color_mode;
  bool is_raw;
  std::vector<uint8_t> raw_image;     // the current raw frame; empty between frames
};


class Camera : public Dpi_model
{
  friend class Camera_i2c_slave;

public:
  Camera(js::config *config, void *handle);

  void start();

  void i2c_tx_edge(int64_t timestamp, int scl, int sda);

  bool i2c_is_read;

private:

  void dpi_task();
  static void dpi_task_stub(Camera *);
  void clock_gen();

  Cpi_itf *cpi;

  int64_t period;
  int64_t frequency;

  int pclk;

  int width;
  int height;

  int nb_images;

  int color_mode;
  int pclk_value;
  int state;
  int cnt;
  int targetcnt;
  int lineptr;
  int colptr;
  int bytesel;
  int framesel;

  int vsync;
  int href;
  int data;

  Camera_stream *stream;

  // the sensor's registers that decide when it streams (edgernn; see the top of this file)
  int mode_select;
  int frame_count;
  int frames_left;
  void write_register(unsigned int addr, uint8_t value);
  int read_register(unsigned int addr);
  bool streaming() { return this->mode_select == 1 || this->mode_select == 3; }

  I2c_itf *i2c;
  Camera_i2c_slave *i2c_slave;

  void *trace;
};

enum {
STATE_INIT,
STATE_SOF,
STATE_WAIT_SOF,
STATE_SEND_LINE,
STATE_WAIT_EOF
};

enum {
  COLOR_MODE_GRAY,
  COLOR_MODE_RGB565,
  COLOR_MODE_RAW,
};

#define TP 2
#define TLINE (width+144)*TP


Camera::Camera(js::config *config, void *handle) : Dpi_model(config, handle)
{
#ifdef __MAGICK__
  InitializeMagick(NULL);
#endif

  frequency = 10000000;
  period = 1000000000000 / frequency;

  cpi = new Cpi_itf();
  create_itf("cpi", static_cast<Cpi_itf *>(cpi));

  i2c = new Camera_i2c_itf(this);
  create_itf("i2c", static_cast<I2c_itf *>(i2c));

  this->stream = NULL;
  this->mode_select = 0;          // the HM01B0 powers up in standby
  this->frame_count = 1;
  this->frames_left = 0;

  // Default color mode is 8bit gray
  std::string color_mode = config->get_child_str("color-mode");
  if (color_mode == "raw")
    this->color_mode = COLOR_MODE_RAW;
  else
    this->color_mode = COLOR_MODE_GRAY;

  this->width = 324;
  this->height = 244;

  // Default color mode is 16bits RGB565
  //color_mode = COLOR_MODE_RGB565;
  js::config *stream_config = config->get("image-stream");
  if (stream_config)
  {
    string stream_path = stream_config->get_str();
    this->stream = new Camera_stream(this, stream_path.c_str(), this->color_mode);
    this->stream->set_image_size(this->width, this->height);
  }

  this->i2c_slave = new Camera_i2c_slave(this, 0x24);

  this->trace = this->trace_new(config->get_child_str("name").c_str());
}

void Camera::start()
{
  if (this->stream)
    create_periodic_handler(this->period/2, (void *)&Camera::dpi_task_stub, this);

  this->pclk_value = 0;
  this->state = STATE_INIT;

  this->vsync = 0;
  this->href = 0;
  this->data = 0;
}

void Camera::dpi_task_stub(Camera *_this)
{
  _this->clock_gen();
}

void Camera::clock_gen()
{
  this->pclk_value ^= 1;

  if (this->pclk_value)
  {
    switch (this->state) {
      case STATE_INIT:
        if (!this->streaming())
          break;                    // standby: no frame starts
        if (this->mode_select == 3)
          this->frames_left--;      // N-frame streaming: this frame is one of the N
        this->trace_msg(this->trace, 4, "State INIT");
        this->cnt = 0;
        this->targetcnt = 3*TLINE;
        this->state = STATE_SOF;
        this->bytesel = 0;
        this->framesel = 0;
        break;

      case STATE_SOF:
        if (this->cnt == 0)
          this->trace_msg(this->trace, 2, "Starting frame");
        this->trace_msg(this->trace, 4, "State SOF (cnt: %d, targetcnt: %d)", this->cnt, this->targetcnt);
        this->vsync = 1;
        this->cnt++;
        if (this->cnt == this->targetcnt) {
          this->cnt = 0;
          this->targetcnt = 17*TLINE;
          this->state = STATE_WAIT_SOF;
          this->vsync = 0;
        }
        break;

      case STATE_WAIT_SOF:
        this->trace_msg(this->trace, 4, "State WAIT_SOF (cnt: %d, targetcnt: %d)", this->cnt, this->targetcnt);
        this->cnt++;
        if (this->cnt == this->targetcnt) {
          this->state = STATE_SEND_LINE;
          this->lineptr = 0;
          this->colptr = 0;
        }
        break;

      case STATE_SEND_LINE: {
        this->href = 1;

        if (this->color_mode == COLOR_MODE_GRAY)
        {
          this->bytesel = 1;
          if (stream)
          {
            data = stream->get_pixel();
          }

          //if (stimImg != NULL) {
          //  pixel = ((uint32_t *)stimImg[framesel])[(lineptr*width)+2*colptr+offset];
          //}

          //data = 0.2989 * ((pixel >> 16) & 0xff) +
          //       0.5870 * ((pixel >>  8) & 0xff) +
          //       0.1140 * ((pixel >>  0) & 0xff);
        }
        else if (this->color_mode == COLOR_MODE_RAW)
        {
          this->bytesel = 1;

          int pixel  = 0;

          if (stream)
          {
            pixel = stream->get_pixel();
          }

          // Raw bayer mode. Line 0: BGBG, Line 1: GRGR
          int line = this->width - this->lineptr -1;
          if (line & 1)
          {
            if (this->colptr & 1)
              this->data = (pixel >> 16) & 0xff;
            else
              this->data = (pixel >> 8) & 0xff;
          }
          else
          {
            if (this->colptr & 1)
              this->data = (pixel >> 8) & 0xff;
            else
              this->data = (pixel >> 0) & 0xff;
          }
        }
        else
        {
          int pixel  = 0;

          if (stream)
          {
            pixel = stream->get_pixel();
          }

          //if (stimImg != NULL) {
          //  ((uint32_t *)stimImg[framesel])[(lineptr*width)+colptr];
          //}

          // Coded with RGB565
          if (bytesel) this->data = (((pixel >> 10) & 0x7) << 5) | (((pixel >> 3) & 0x1f) << 0);
          else         this->data = (((pixel >> 19) & 0x1f) << 3) | (((pixel >> 13) & 0x7) << 0);
        }

        if (this->bytesel == 1) {
          this->bytesel = 0;
          if(this->colptr == (this->width-1)) {
            this->colptr = 0;
            if(this->lineptr == (this->height-1)) {
              this->state = STATE_WAIT_EOF;
              this->cnt = 0;
              this->targetcnt = 10*TLINE;
              this->lineptr = 0;
            } else {
              this->lineptr = this->lineptr + 1;
            }
          } else {
            this->colptr = this->colptr + 1;
          }

        } else {
          this->bytesel = 1;
        }
        this->trace_msg(this->trace, 4, "State SEND_LINE (data: 0x%x)", data);
        break;
      }

      case STATE_WAIT_EOF:
        this->trace_msg(this->trace, 4, "State WAIT_EOF (cnt: %d, targetcnt: %d)", this->cnt, this->targetcnt);
        this->href = 0;
        this->data = 0;
        this->cnt++;
        if (this->cnt == this->targetcnt) {
          this->state = STATE_INIT;   // the next frame starts from INIT, when the sensor streams
          this->cnt = 0;
          this->targetcnt = 3*TLINE;
          if (this->mode_select == 3 && this->frames_left <= 0)
          {
            this->mode_select = 0;      // N frames sent: back to standby by itself
            this->trace_msg(this->trace, 2, "N-frame streaming done: standby");
          }
          this->framesel++;
          if (this->framesel == this->nb_images) this->framesel = 0;
        }
        break;
    }
  }

  this->cpi->edge(this->pclk_value, this->href, this->vsync, this->data);
}

void Camera::dpi_task()
{
  this->cpi->edge(0, 0, 0, 0);

  while(1) {
    this->wait_ps(period/2);
    this->clock_gen();
  }
}


Camera_stream::Camera_stream(Camera *top, string path, int color_mode)
 : top(top), stream_path(path), frame_index(0), current_pixel(0), nb_pixel(0), color_mode(color_mode),
   is_raw(false)
{
#ifdef __MAGICK__
  image_buffer = NULL;
#endif
}

void Camera_stream::set_image_size(int width, int height)
{
  this->width = width;
  this->height = height;
  nb_pixel = width * height;
}

bool Camera_stream::fetch_raw(const char *path)
{
  FILE *file = fopen(path, "rb");
  if (file == NULL)
    return false;
  size_t size = (size_t)this->width * this->height * (this->color_mode == COLOR_MODE_GRAY ? 1 : 3);
  this->raw_image.assign(size, 0);
  size_t got = fread(this->raw_image.data(), 1, size, file);
  fclose(file);
  if (got != size)
  {
    fprintf(stderr, "camera: image file %s is too short (%zu bytes of %zu)\n", path, got, size);
    exit(1);
  }
  return true;
}

bool Camera_stream::fetch_image()
{
  char path[strlen(stream_path.c_str()) + 100];
  this->is_raw = strstr(stream_path.c_str(), ".raw") != NULL;
  while(this->is_raw)
  {
    snprintf(path, sizeof(path), stream_path.c_str(), frame_index);
    if (this->fetch_raw(path))
    {
      frame_index++;
      return true;
    }
    if (frame_index == 0)
    {
      fprintf(stderr, "camera: cannot open image file %s\n", path);
      exit(1);
    }
    frame_index = 0;
  }
  while(1)
  {
    sprintf(path, stream_path.c_str(), frame_index);

#ifdef __MAGICK__
    try {
      image.read(path);
      break;
    }
    catch( Exception &error_ ) {
      if (frame_index == 0) {
        throw;
      }
    }
#endif

    frame_index = 0;
  }

  //dpi_print(top->handle, ("Opened image (path: " + string(path) + ")").c_str());
  frame_index++;

#ifdef __MAGICK__
  image.extent(Geometry(width, height));

  if (color_mode == COLOR_MODE_GRAY)
  {
    image.quantizeColorSpace( GRAYColorspace );
    image.quantizeColors( 256 );
    image.quantize( );
  }


  image_buffer = (PixelPacket*) image.getPixels(0, 0, width, height);
#endif

  return true;
}

unsigned int Camera_stream::get_pixel()
{
  if (this->raw_image.empty() && strstr(stream_path.c_str(), ".raw") != NULL)
    fetch_image();
  if (!this->raw_image.empty())
  {
    unsigned int result;
    if (this->color_mode == COLOR_MODE_GRAY)
      result = this->raw_image[current_pixel];
    else
      result = (this->raw_image[3*current_pixel] << 16) | (this->raw_image[3*current_pixel + 1] << 8)
               | this->raw_image[3*current_pixel + 2];
    current_pixel++;
    if (current_pixel == nb_pixel)
    {
      current_pixel = 0;
      this->raw_image.clear();
    }
    return result;
  }
#ifdef __MAGICK__
  if (image_buffer == NULL) fetch_image();

  PixelPacket *pixel = &image_buffer[current_pixel];
  current_pixel++;
  if (current_pixel == nb_pixel)
  {
    current_pixel = 0;
    image_buffer = NULL;
  }

  unsigned int shift = (sizeof(pixel->red) - 1)*8;
  if (color_mode == COLOR_MODE_GRAY)
  {
    return pixel->red >> shift;
  }
  else
  {
    unsigned char red = pixel->red >> shift;
    unsigned char green = pixel->green >> shift;
    unsigned char blue = pixel->blue >> shift;
    return (red << 16) | (green << 8) | blue;
  }
#else
  return 0;
#endif
}



void Camera::i2c_tx_edge(int64_t timestamp, int scl, int sda)
{
  int sda_out = 0;
  this->i2c_slave->handle_edge(scl, sda, &sda_out);
  if (scl && this->i2c_is_read)
  {
    this->i2c->rx_edge(sda_out);
  }
}



void Camera::write_register(unsigned int addr, uint8_t value)
{
  switch (addr)
  {
  case 0x0100:                      // MODE_SELECT
    this->mode_select = value & 0x7;
    if (this->mode_select == 3)
      this->frames_left = this->frame_count > 0 ? this->frame_count : 1;
    break;
  case 0x0103:                      // SW_RESET
    this->mode_select = 0;
    break;
  case 0x3020:                      // PMU_AUTOSLEEP_FRAMECNT
    this->frame_count = value;
    break;
  default:
    break;
  }
}

void Camera_i2c_itf::tx_edge(int64_t timestamp, int scl, int sda)
{
  top->i2c_tx_edge(timestamp, scl, sda);
}

Camera_i2c_slave::Camera_i2c_slave(Camera *top, unsigned int address) : I2c_slave(address), top(top)
{
  this->pending_addr = 0;
  this->pending_bytes = 0;
}

void Camera_i2c_slave::start(unsigned int address, bool is_read)
{
  this->top->i2c_is_read = is_read;
}

void Camera_i2c_slave::get_data()
{
    if (this->top->i2c_is_read)
    {
      uint32_t addr = ((this->pending_addr & 0xff) << 8) | ((this->pending_addr >> 8) & 0xff);
      if (addr == 0x0100)
      {
        this->send_byte(this->top->mode_select);
      }
      else if (addr == 0x0000)
      {
        this->send_byte(0x01);
      }
      else if (addr == 0x0001)
      {
        this->send_byte(0xb0);
      }
      else
      {
        this->send_byte(0x55);
      }
      this->pending_addr = 0;
      this->pending_bytes = 0;
      this->top->trace_msg(this->top->trace, 2, "Reading register (address: 0x%x, value: 0x%x)", this->pending_addr, 0);
    }
}


void Camera_i2c_slave::handle_byte(uint8_t byte)
{
  if (this->pending_bytes == 0)
  {
    this->pending_addr = this->pending_addr | (byte);
    this->pending_bytes = 1;
  }
  else if (this->pending_bytes == 1)
  {
    this->pending_addr = this->pending_addr | byte << 8;
    this->pending_bytes = 2;
  }
  else
  {
    this->top->trace_msg(this->top->trace, 2, "Writing register (address: 0x%x, value: 0x%x)", this->pending_addr, byte);
    this->top->write_register(((this->pending_addr & 0xff) << 8) | ((this->pending_addr >> 8) & 0xff), byte);
    this->pending_bytes = 0;
    this->pending_addr = 0;
  }
}

void Camera_i2c_slave::ack()
{
  if (this->top->i2c_is_read)
  {
    this->send_byte(0);
  }
}

void Camera_i2c_slave::stop()
{
}


extern "C" Dpi_model *dpi_model_new(js::config *config, void *handle)
{
  return new Camera(config, handle);
}
