#ifndef AFT_COPENSSL_SHIM_H
#define AFT_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/sha.h>
#endif
