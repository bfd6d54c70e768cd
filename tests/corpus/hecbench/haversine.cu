// SPDX-License-Identifier: Apache-2.0; origin: https://github.com/zjin-lcf/HeCBench/blob/f27000a5188f8ac79bd43fc95a1b3f890c18823d/src/haversine-cuda/distance.cu
// The licence of this benchmark (src/haversine-cuda/LICENSE, verbatim):
/*
 Copyright (c) 2020, NVIDIA CORPORATION.

 Licensed under the Apache License, Version 2.0 (the "License");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at

     http://www.apache.org/licenses/LICENSE-2.0

 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.

*/
// Device code of HeCBench's haversine: compute_haversine_distance, verbatim, with the defines it
// uses from distance.h. The host function distance_device and the host-only includes are left out.

// <math.h>'s M_PI, which distance.h gets from <math.h> (NVRTC has no <math.h>).
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

// from src/haversine-cuda/distance.h (verbatim)
#define DEGREE_TO_RADIAN  M_PI / 180.0
#define EARTH_RADIUS_KM   6371.0

// from src/haversine-cuda/distance.cu (verbatim)
__global__ void compute_haversine_distance(
  const double4 *__restrict__ p,
        double*__restrict__ distance,
  const int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    auto ay = p[i].x * DEGREE_TO_RADIAN;  // a_lat
    auto ax = p[i].y * DEGREE_TO_RADIAN;  // a_lon
    auto by = p[i].z * DEGREE_TO_RADIAN;  // b_lat
    auto bx = p[i].w * DEGREE_TO_RADIAN;  // b_lon

    // haversine formula
    auto x        = (bx - ax) / 2.0;
    auto y        = (by - ay) / 2.0;
    auto sinysqrd = sin(y) * sin(y);
    auto sinxsqrd = sin(x) * sin(x);
    auto scale    = cos(ay) * cos(by);
    distance[i] = 2.0 * EARTH_RADIUS_KM * asin(sqrt(sinysqrd + sinxsqrd * scale));
  }
}
