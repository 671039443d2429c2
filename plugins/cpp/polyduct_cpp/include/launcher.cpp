/* polyduct-cpp launcher: a callable type that turns `kernel(*tensors, *sizes)` into one C call.
 *
 * Tensor pointers come from torch's C accessor of a tensor object's data pointer for the exact
 * tensor types registered with `use_tensor_api` (no Python call), else from `data_ptr()`; sizes
 * are Python ints. All are passed as int64 (the SysV x86-64 and AArch64 ABIs pass pointers and
 * int64 in the same registers), followed by the kernel's error slot. A non-zero slot after the
 * call is handed to `on_error`, which raises. C++ only to turn an exception of the accessor into
 * a Python error; no C++ library header beyond <exception>.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include <exception>

#define PD_MAX_ARGS 40
typedef int64_t I;

typedef struct {
    PyObject_HEAD
    void* fn;
    Py_ssize_t ntensors;
    Py_ssize_t nsizes;
    int64_t err[4];
    PyObject* on_error;
} Kernel;

static PyObject* data_ptr_name;
static PyObject* tensor_types;                 /* tuple of exact types for the accessor */
static void* (*tensor_data_ptr)(PyObject*);    /* torch's accessor, or NULL */

static int fast_tensor(PyObject* item) {
    if (!tensor_data_ptr) return 0;
    PyObject* type = (PyObject*)Py_TYPE(item);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tensor_types); ++i)
        if (PyTuple_GET_ITEM(tensor_types, i) == type) return 1;
    return 0;
}

/* The data address of tensor `item` into `out`; -1 with a Python error set on failure. */
static int tensor_address(PyObject* item, I* out) {
    if (fast_tensor(item)) {
        try {
            *out = (I)(intptr_t)tensor_data_ptr(item);
            return 0;
        } catch (const std::exception& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
        } catch (...) {
            PyErr_SetString(PyExc_RuntimeError, "reading a tensor's data pointer failed");
        }
        return -1;
    }
    PyObject* ptr = PyObject_CallMethodNoArgs(item, data_ptr_name);
    if (!ptr) return -1;
    *out = (I)PyLong_AsUnsignedLongLongMask(ptr);
    Py_DECREF(ptr);
    return PyErr_Occurred() ? -1 : 0;
}

static void dispatch(void* fn, const I* a, Py_ssize_t n) {
    switch (n) {
    case 1: ((void (*)(I))fn)(a[0]); break;
    case 2: ((void (*)(I, I))fn)(a[0], a[1]); break;
    case 3: ((void (*)(I, I, I))fn)(a[0], a[1], a[2]); break;
    case 4: ((void (*)(I, I, I, I))fn)(a[0], a[1], a[2], a[3]); break;
    case 5: ((void (*)(I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4]); break;
    case 6: ((void (*)(I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5]); break;
    case 7: ((void (*)(I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
    case 8: ((void (*)(I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
    case 9: ((void (*)(I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]); break;
    case 10: ((void (*)(I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]); break;
    case 11: ((void (*)(I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]); break;
    case 12: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]); break;
    case 13: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12]); break;
    case 14: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13]); break;
    case 15: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14]); break;
    case 16: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]); break;
    case 17: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16]); break;
    case 18: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17]); break;
    case 19: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18]); break;
    case 20: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19]); break;
    case 21: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20]); break;
    case 22: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21]); break;
    case 23: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22]); break;
    case 24: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23]); break;
    case 25: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24]); break;
    case 26: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25]); break;
    case 27: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26]); break;
    case 28: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27]); break;
    case 29: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28]); break;
    case 30: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29]); break;
    case 31: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30]); break;
    case 32: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31]); break;
    case 33: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32]); break;
    case 34: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33]); break;
    case 35: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34]); break;
    case 36: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35]); break;
    case 37: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36]); break;
    case 38: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37]); break;
    case 39: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38]); break;
    case 40: ((void (*)(I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39]); break;
    default: break;
    }
}

static PyObject* Kernel_call(PyObject* obj, PyObject* args, PyObject* kwargs) {
    Kernel* self = (Kernel*)obj;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    I a[PD_MAX_ARGS + 1];
    if (n != self->ntensors + self->nsizes || (kwargs && PyDict_GET_SIZE(kwargs))) {
        PyErr_Format(PyExc_TypeError, "kernel takes %zd tensors and %zd sizes, got %zd arguments",
                     self->ntensors, self->nsizes, n);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = PyTuple_GET_ITEM(args, i);
        if (i < self->ntensors) {
            if (tensor_address(item, &a[i]) < 0) return NULL;
        } else {
            a[i] = (I)PyLong_AsLongLong(item);
            if (a[i] == -1 && PyErr_Occurred()) return NULL;
        }
    }
    a[n] = (I)(intptr_t)self->err;
    Py_BEGIN_ALLOW_THREADS
    dispatch(self->fn, a, n + 1);
    Py_END_ALLOW_THREADS
    if (self->err[0]) {
        PyObject* r = PyObject_CallFunction(self->on_error, "LLLL", (long long)self->err[0],
                                            (long long)self->err[1], (long long)self->err[2],
                                            (long long)self->err[3]);
        self->err[0] = self->err[1] = self->err[2] = self->err[3] = 0;
        Py_XDECREF(r);
        return NULL;
    }
    Py_RETURN_NONE;
}

static int Kernel_init(PyObject* obj, PyObject* args, PyObject* kwargs) {
    Kernel* self = (Kernel*)obj;
    unsigned long long fn;
    PyObject* on_error;
    if (!PyArg_ParseTuple(args, "KnnO", &fn, &self->ntensors, &self->nsizes, &on_error)) return -1;
    if (self->ntensors + self->nsizes + 1 > PD_MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many kernel arguments for the launcher");
        return -1;
    }
    self->fn = (void*)(uintptr_t)fn;
    self->err[0] = self->err[1] = self->err[2] = self->err[3] = 0;
    Py_INCREF(on_error);
    Py_XSETREF(self->on_error, on_error);
    return 0;
}

static void Kernel_dealloc(PyObject* obj) {
    Kernel* self = (Kernel*)obj;
    Py_XDECREF(self->on_error);
    Py_TYPE(obj)->tp_free(obj);
}

/* use_tensor_api(types, address): read data pointers of objects whose exact type is in `types`
 * with the C function at `address` (`void* f(PyObject*)`); address 0 turns it off. */
static PyObject* use_tensor_api(PyObject* mod, PyObject* args) {
    PyObject* types;
    unsigned long long address;
    if (!PyArg_ParseTuple(args, "O!K", &PyTuple_Type, &types, &address)) return NULL;
    Py_INCREF(types);
    Py_XSETREF(tensor_types, types);
    tensor_data_ptr = (void* (*)(PyObject*))(uintptr_t)address;
    Py_RETURN_NONE;
}

static PyTypeObject KernelType = {PyVarObject_HEAD_INIT(NULL, 0)};

static PyMethodDef methods[] = {
    {"use_tensor_api", use_tensor_api, METH_VARARGS, "Read data pointers of these exact types in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pd_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pd_launch(void) {
    KernelType.tp_name = "_pd_launch.Kernel";
    KernelType.tp_basicsize = sizeof(Kernel);
    KernelType.tp_flags = Py_TPFLAGS_DEFAULT;
    KernelType.tp_doc = "A compiled polyduct-cpp kernel: kernel(*tensors, *sizes).";
    KernelType.tp_new = PyType_GenericNew;
    KernelType.tp_init = Kernel_init;
    KernelType.tp_dealloc = Kernel_dealloc;
    KernelType.tp_call = Kernel_call;
    if (PyType_Ready(&KernelType) < 0) return NULL;
    data_ptr_name = PyUnicode_InternFromString("data_ptr");
    PyObject* m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&KernelType);
    PyModule_AddObject(m, "Kernel", (PyObject*)&KernelType);
    return m;
}
