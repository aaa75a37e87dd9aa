"""The dtype registry agrees with torch and with the safetensors spec it is read against."""

import pytest

from ckptdiff.dtypes import (
    DTYPE_BITS,
    DTYPES,
    FLOAT_DTYPES,
    STORAGE_DTYPES,
    TORCH_DTYPES,
    TORCH_WITHOUT_SAFETENSORS_DTYPE,
    from_torch_name,
)

torch = pytest.importorskip("torch")


def test_every_torch_name_is_a_torch_dtype_of_the_same_width_and_kind():
    for alias, name in TORCH_DTYPES.items():
        torch_dtype = getattr(torch, alias)
        assert isinstance(torch_dtype, torch.dtype), alias
        assert torch_dtype.itemsize * 8 == DTYPE_BITS[name], alias
        assert torch_dtype.is_floating_point == (name in FLOAT_DTYPES), alias


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_every_storage_class_is_torchs_and_holds_its_dtype():
    for storage, name in STORAGE_DTYPES.items():
        assert getattr(torch, storage).dtype == getattr(torch, DTYPES[name].torch_names[0]), storage


def test_config_spellings_resolve_and_unknown_ones_do_not():
    assert from_torch_name("torch.bfloat16") == "BF16"
    assert from_torch_name("half") == "F16"
    assert from_torch_name("float8_e4m3fn") == "F8_E4M3"
    assert from_torch_name("complex128") is None
    assert from_torch_name("BF16") is None


def test_floats_are_the_real_floating_point_dtypes():
    assert {"F4", "F6_E2M3", "F8_E8M0", "BF16", "F64"} <= FLOAT_DTYPES
    assert not FLOAT_DTYPES & {"C64", "BOOL", "I8", "U64"}


def test_torch_dtypes_without_a_safetensors_dtype_are_real_torch_dtypes_and_unmapped():
    for alias in TORCH_WITHOUT_SAFETENSORS_DTYPE:
        assert alias not in TORCH_DTYPES
        if hasattr(torch, alias):  # float4_e2m1fn_x2 is newer than some torch releases
            assert isinstance(getattr(torch, alias), torch.dtype), alias
