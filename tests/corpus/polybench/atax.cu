// SPDX-License-Identifier: BSD-3-Clause AND LicenseRef-PolyBench-OSU (PolyBench/ACC: University of Delaware, BSD-3-Clause; PolyBench: Ohio State University licence; both in LICENSE beside this file); origin: https://github.com/cavazos-lab/PolyBench-ACC/blob/70ea4ca9047dc4ec9c3ca79b4c91b3b2cc1510e7/CUDA/linear-algebra/kernels/atax/atax.cu
// From PolyBench/GPU 1.0, cavazos-lab/PolyBench-ACC (BSD-3-Clause (Univ. of Delaware) AND PolyBench/C licence (Ohio State Univ.); both in LICENSE beside this file), CUDA/linear-algebra/kernels/atax/atax.cu @ 70ea4ca9047d.
// Device code only, copied verbatim (line ranges below): the kernels, the whole .cuh (problem
// sizes: STANDARD_DATASET unless another *_DATASET is defined) and POLYBENCH_LOOP_BOUND from
// utilities/polybench.h. Host code and host-only/POSIX includes are left out.
// Left out of the copied lines: the host-only include <cuda.h>, which the kernels do not use
// and NVRTC cannot compile.

// ---- verbatim from CUDA/linear-algebra/kernels/atax/atax.cu, lines 1-9, 11-14
/**
 * atax.cu: This file is part of the PolyBench/GPU 1.0 test suite.
 *
 *
 * Contact: Scott Grauer-Gray <sgrauerg@gmail.com>
 * Will Killian <killian@udel.edu>
 * Louis-Noel Pouchet <pouchet@cse.ohio-state.edu>
 * Web address: http://www.cse.ohio-state.edu/~pouchet/software/polybench/GPU
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <assert.h>

// ---- verbatim from CUDA/utilities/polybench.h, lines 44-50
/* Scalar loop bounds in SCoPs. By default, use parametric loop bounds. */
# ifdef POLYBENCH_USE_SCALAR_LB
#  define POLYBENCH_LOOP_BOUND(x,y) x
# else
/* default: */
#  define POLYBENCH_LOOP_BOUND(x,y) y
# endif

// ---- verbatim from CUDA/linear-algebra/kernels/atax/atax.cuh, lines 1-61
/**
 * atax.cuh: This file is part of the PolyBench/GPU 1.0 test suite.
 *
 *
 * Contact: Scott Grauer-Gray <sgrauerg@gmail.com>
 * Will Killian <killian@udel.edu>
 * Louis-Noel Pouchet <pouchet@cse.ohio-state.edu>
 * Web address: http://www.cse.ohio-state.edu/~pouchet/software/polybench/GPU
 */

#ifndef ATAX_CUH
# define ATAX_CUH

/* Default to STANDARD_DATASET. */
# if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(LARGE_DATASET) && !defined(EXTRALARGE_DATASET)
#  define STANDARD_DATASET
# endif

/* Do not define anything if the user manually defines the size. */
# if !defined(NX) && !defined(NY)
/* Define the possible dataset sizes. */
#  ifdef MINI_DATASET
#define NX 1024
#define NY 1024
#  endif

#  ifdef SMALL_DATASET
#define NX 2048
#define NY 2048
#  endif

#  ifdef STANDARD_DATASET /* Default if unspecified. */
#define NX 4096
#define NY 4096
#  endif

#  ifdef LARGE_DATASET
#define NX 8192
#define NY 8192
#  endif

#  ifdef EXTRALARGE_DATASET
#define NX 16384
#define NY 16384
#  endif
# endif /* !N */

# define _PB_NX POLYBENCH_LOOP_BOUND(NX,nx)
# define _PB_NY POLYBENCH_LOOP_BOUND(NY,ny)

# ifndef DATA_TYPE
#  define DATA_TYPE float
#  define DATA_PRINTF_MODIFIER "%0.2lf "
# endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8


#endif /* !ATAX*/

// ---- verbatim from CUDA/linear-algebra/kernels/atax/atax.cu, lines 80-108
__global__ void atax_kernel1(int nx, int ny, DATA_TYPE *A, DATA_TYPE *x, DATA_TYPE *tmp)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < _PB_NX)
	{
		tmp[i] = 0;
		int j;
		for(j=0; j < _PB_NY; j++)
		{
			tmp[i] += A[i*NY+j] * x[j];
		}
	}
}

__global__ void atax_kernel2(int nx, int ny, DATA_TYPE *A, DATA_TYPE *y, DATA_TYPE *tmp)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	
	if (j < _PB_NY)
	{
		y[j] = 0;
		int i;
		for(i=0; i < _PB_NX; i++)
		{
			y[j] += A[i*NY+j] * tmp[i];
		}
	}
}
